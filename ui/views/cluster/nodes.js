// Nodes of a cluster's HyperPod cluster (cluster page): status and health per node, per-node
// actions along the ladder investigate → reboot → replace, and the same actions on a
// multi-selection. Investigating a node reads its detail (DescribeClusterNode: status message,
// launch time, private address, capacity and interface type, lifecycle script, AMI) and its
// latest events. Replace and delete lose the nodes' local volumes: the request carries
// acknowledge_local_data_loss only when the user ticked "local volumes … will be lost"; without
// it the control plane refuses (422) and says so next to that box. Accepted actions are followed
// on the embedded progress panel.

import { h, replace, id, keepFocus, timeEl, words, routeHref } from '../../lib/dom.js';
import * as api from '../../lib/api.js';
import { badge } from '../../components/status-badge.js';
import { openDialog } from '../../components/dialog.js';
import { KIND_TITLES } from '../../components/operation-progress.js';
import { showFindings, clearFindings } from '../../lib/forms.js';
import { stepList, followOperation, refusal } from '../../components/plan.js';
import { eventsTable, nodeEvents } from '../../components/events-table.js';

const NODE_LIMIT = 200;
/** Most nodes one request may name (the server's batch limit; it validates it too). */
const BATCH_LIMIT = 25;

/** What a node status means for its health, and what to look for (read-only advice). */
const HEALTH = {
  Running: ['healthy', 'ok', 'Running. If jobs still fail on it, look at the Kubernetes node (conditions, taints, health label) below.'],
  Failure: ['unhealthy', 'bad', 'HyperPod marked the node faulty. With node auto-recovery on, HyperPod reboots or replaces it on its own; a node failing again and again points to hardware (GPU Xid errors, EFA link down).'],
  DeepHealthCheckInProgress: ['checking', 'busy', 'Deep health checks run before the node accepts work; on large accelerators they take tens of minutes. Wait before escalating.'],
  Pending: ['starting', 'busy', 'Launching. Pending with the group below its target usually means capacity in the zone, not a node fault.'],
  SystemUpdating: ['updating', 'busy', 'A software update or reboot is in progress; the node returns to Running on its own.'],
  ShuttingDown: ['leaving', 'muted', 'Being terminated (deleted, or replaced by a new instance).'],
};

function health(status) {
  return HEALTH[status] || ['unknown', 'muted', 'An unusual status: read the node in Kubernetes before acting.'];
}

const TONE_GLYPH = { ok: '✓', bad: '✕', busy: '◔', warn: '!', muted: '–' };

/** A node status badge: tone and glyph from what the status means for its health. */
function statusBadge(status) {
  const tone = health(status)[1];
  return badge(status, tone, TONE_GLYPH[tone]);
}

const ACTIONS = {
  reboot: { verb: 'Reboot', kind: 'reboot_nodes', loses: false },
  replace: { verb: 'Replace', kind: 'replace_nodes', loses: true },
  delete: { verb: 'Delete', kind: 'delete_nodes', loses: true },
};

const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

export function nodesSection({ name, speed, reload }) {
  const st = { cluster: null, nodes: [], groups: [], ops: [], selected: new Set() };
  const summary = h('span', { class: 'muted section-summary', role: 'status' });
  const selCount = h('span', { class: 'sel-count' }, 'No nodes selected');
  const bulk = {
    reboot: h('button', { type: 'button', class: 'btn small', onclick: () => act('reboot', [...st.selected]) }, 'Reboot selected'),
    replace: h('button', { type: 'button', class: 'btn small', onclick: () => act('replace', [...st.selected]) }, 'Replace selected…'),
    delete: h('button', { type: 'button', class: 'btn small danger-outline', onclick: () => act('delete', [...st.selected]) }, 'Delete selected…'),
    check: h('button', { type: 'button', class: 'btn small', id: 'nodes-health-check', onclick: () => healthCheck([...st.selected]) }, 'Health check selected…'),
    clear: h('button', { type: 'button', class: 'btn small ghost', onclick: () => { st.selected.clear(); renderTable(); bulk.reboot.focus(); } }, 'Clear selection'),
  };
  const toolbar = h('div', { class: 'bulkbar', role: 'toolbar', 'aria-label': 'Actions on the selected nodes' },
    selCount, bulk.check, bulk.reboot, bulk.replace, bulk.delete, bulk.clear);
  const tableSlot = h('div', { class: 'nodes-slot' }, h('p', { class: 'muted' }, 'Reading the nodes…'));
  const activity = h('div', { class: 'activity-slot', id: 'nodes-activity' });
  const el = h('section', { class: 'card', 'aria-labelledby': 'nodes-title', id: 'nodes-card' },
    h('div', { class: 'section-head' }, h('h2', { id: 'nodes-title' }, 'Nodes'), summary),
    h('p', { class: 'help ladder-help' }, 'An unhealthy node? ', h('strong', {}, 'Investigate → reboot → replace'),
      ', in that order. A reboot keeps the node’s local volumes; replace and delete lose them.'),
    toolbar, tableSlot, activity);

  function update(cluster, ops = []) {
    st.cluster = cluster;
    st.nodes = cluster.nodes || [];
    st.groups = cluster.hyperpod ? cluster.hyperpod.instance_groups : [];
    st.ops = ops;
    const ids = new Set(st.nodes.map((n) => n.instance_id));
    for (const sel of [...st.selected]) if (!ids.has(sel)) st.selected.delete(sel);
    const counts = new Map();
    for (const n of st.nodes) counts.set(health(n.status)[0], (counts.get(health(n.status)[0]) || 0) + 1);
    summary.textContent = st.nodes.length
      ? [plural(st.nodes.length, 'node'), ...[...counts].map(([k, v]) => `${v} ${k}`)].join(' · ')
      : '';
    toolbar.hidden = st.nodes.length === 0;
    keepFocus(el, renderTable);
    const open = activity.querySelector('[data-investigate]');
    if (open && st.nodes.some((n) => n.instance_id === open.dataset.investigate)) {
      keepFocus(activity, () => investigate(open.dataset.investigate, { refresh: true }));
    }
  }

  function syncToolbar() {
    const n = st.selected.size;
    selCount.textContent = n ? `${plural(n, 'node')} selected` : 'No nodes selected';
    for (const key of ['check', 'reboot', 'replace', 'delete', 'clear']) bulk[key].disabled = n === 0;
    const all = tableSlot.querySelector('#nodes-select-all');
    if (all) {
      const shown = Math.min(st.nodes.length, NODE_LIMIT);
      all.checked = n > 0 && n === shown;
      all.indeterminate = n > 0 && n < shown;
    }
  }

  let shownSig = null;

  function renderTable() {
    // Rebuilt only when the nodes changed: a refresh that changes nothing keeps every element.
    const sig = JSON.stringify([st.nodes.slice(0, NODE_LIMIT), st.nodes.length, !!st.cluster?.hyperpod]);
    if (sig === shownSig) {
      for (const box of tableSlot.querySelectorAll('input[data-node-select]')) {
        box.checked = st.selected.has(box.dataset.nodeSelect);
        box.closest('tr').classList.toggle('selected', box.checked);
      }
      syncToolbar();
      return;
    }
    shownSig = sig;
    if (!st.nodes.length) {
      replace(tableSlot, h('p', { class: 'muted' }, st.cluster?.hyperpod ? 'No nodes: every instance group is at zero or still launching.' : 'No nodes.'));
      syncToolbar();
      return;
    }
    const selectAll = h('input', {
      type: 'checkbox', id: 'nodes-select-all', 'aria-label': 'Select every node', dataset: { focusKey: 'select-all' },
      onchange: (e) => {
        st.selected.clear();
        if (e.target.checked) for (const n of st.nodes.slice(0, NODE_LIMIT)) st.selected.add(n.instance_id);
        for (const box of tableSlot.querySelectorAll('input[data-node-select]')) box.checked = st.selected.has(box.dataset.nodeSelect);
        syncToolbar();
      },
    });
    const head = [selectAll, 'Instance', 'Group', 'Instance type', 'Availability Zone', 'Status', 'Health', ''];
    replace(tableSlot,
      h('div', { class: 'table-wrap' }, h('table', { class: 'table', id: 'nodes-table' },
        h('caption', { class: 'visually-hidden' }, 'Nodes'),
        h('thead', {}, h('tr', {}, head.map((t, i) => h('th', { scope: 'col', class: i === 0 ? 'select-cell' : null },
          t || h('span', { class: 'visually-hidden' }, 'Actions'))))),
        h('tbody', {}, st.nodes.slice(0, NODE_LIMIT).map((n) => {
          const [word, tone] = health(n.status);
          const nid = n.instance_id;
          return h('tr', { dataset: { node: nid, status: n.status }, class: st.selected.has(nid) ? 'selected' : null },
            h('td', { class: 'select-cell' }, h('input', {
              type: 'checkbox', checked: st.selected.has(nid), 'aria-label': `Select ${nid}`,
              dataset: { nodeSelect: nid, focusKey: `sel:${nid}` },
              onchange: (e) => {
                if (e.target.checked) st.selected.add(nid);
                else st.selected.delete(nid);
                e.target.closest('tr').classList.toggle('selected', e.target.checked);
                syncToolbar();
              },
            })),
            h('th', { scope: 'row', class: 'mono' }, nid),
            h('td', {}, n.instance_group),
            h('td', { class: 'mono' }, n.instance_type),
            h('td', {}, n.availability_zone),
            h('td', {}, statusBadge(n.status)),
            h('td', {}, h('span', { class: `health tone-text-${tone}` }, word)),
            h('td', { class: 'nowrap actions-cell' },
              h('button', { type: 'button', class: 'btn small ghost', 'aria-label': `Investigate ${nid}`, dataset: { action: 'investigate', focusKey: `inv:${nid}` }, onclick: () => investigate(nid) }, 'Investigate'), ' ',
              h('button', { type: 'button', class: 'btn small', 'aria-label': `Reboot ${nid}…`, dataset: { action: 'reboot', focusKey: `reboot:${nid}` }, onclick: () => act('reboot', [nid]) }, 'Reboot…'), ' ',
              h('button', { type: 'button', class: 'btn small', 'aria-label': `Replace ${nid}…`, dataset: { action: 'replace', focusKey: `replace:${nid}` }, onclick: () => act('replace', [nid]) }, 'Replace…')));
        })))),
      st.nodes.length > NODE_LIMIT && h('p', { class: 'muted' }, `Showing ${NODE_LIMIT} of ${st.nodes.length} nodes.`));
    syncToolbar();
  }

  /** Node operations (reboot/replace/delete) that named this node, newest first. */
  function historyOf(nid) {
    return st.ops.filter((op) => Array.isArray(op.request?.node_ids) && op.request.node_ids.includes(nid));
  }

  // ---- investigate (read-only) --------------------------------------------------------------

  let investigated = null;

  /** Closes the activity slot; focus goes back to the node's row (else the heading). */
  function closeActivity(nid) {
    replace(activity);
    const target = (nid && tableSlot.querySelector(`[data-focus-key="inv:${CSS.escape(nid)}"]`)) || el.querySelector('#nodes-title');
    if (!target.matches('button')) target.setAttribute('tabindex', '-1');
    target.focus();
  }

  function investigate(nid, { refresh = false } = {}) {
    const n = st.nodes.find((x) => x.instance_id === nid);
    if (!n) return;
    const g = st.groups.find((x) => x.name === n.instance_group);
    const running = st.ops.filter((op) => op.status === 'running');
    const past = historyOf(nid);
    // A refresh rebuilds the panel only when what it shows changed.
    const sig = JSON.stringify([n, g, running.map((o) => o.id), past.map((o) => [o.id, o.status])]);
    if (refresh && sig === investigated) return;
    investigated = sig;
    const [word, tone, advice] = health(n.status);
    const k8sName = `hyperpod-${nid}`;
    const commands = [
      `kubectl get node ${k8sName} -L sagemaker.amazonaws.com/node-health-status`,
      `kubectl describe node ${k8sName}`,
      `kubectl get pods -A --field-selector spec.nodeName=${k8sName}`,
      'kubectl logs -n aws-hyperpod -l app=health-monitoring-agent --tail=200',
    ];
    const rebooted = past.some((op) => op.kind === 'reboot_nodes' && op.status === 'succeeded');
    const heading = h('h3', { tabindex: '-1' }, `Investigate ${nid}`);
    const panel = h('div', { class: 'editor card inset', dataset: { investigate: nid } },
      h('div', { class: 'activity-head' }, heading,
        h('button', { type: 'button', class: 'btn small ghost', 'aria-label': `Close: investigate ${nid}`, onclick: () => closeActivity(nid) }, 'Close')),
      h('div', { class: 'grid-2' },
        h('div', {},
          h('dl', { class: 'props' },
            h('dt', {}, 'Status'), h('dd', {}, statusBadge(n.status), ' ', h('span', { class: `health tone-text-${tone}` }, word)),
            h('dt', {}, 'Kubernetes node'), h('dd', { class: 'mono' }, k8sName),
            h('dt', {}, 'Instance group'), h('dd', {}, n.instance_group,
              g && h('span', { class: 'muted' }, ` · ${g.current_count} / ${g.target_count} nodes, ${words(g.status)}`)),
            h('dt', {}, 'Instance type'), h('dd', { class: 'mono' }, n.instance_type),
            h('dt', {}, 'Availability Zone'), h('dd', {}, n.availability_zone)),
          h('p', { class: 'advice' }, advice)),
        h('div', {},
          h('h4', {}, 'Operations on this cluster'),
          running.length
            ? h('ul', { class: 'op-list' }, running.map((op) => h('li', {},
              h('a', { href: routeHref('operations', op.id) }, KIND_TITLES[op.kind] || words(op.kind)), ' ', badge(op.status),
              h('span', { class: 'muted small-text' }, ' Nodes in flux are expected while it runs.'))))
            : h('p', { class: 'muted' }, 'None running now.'),
          h('h4', {}, 'Earlier actions on this node'),
          past.length
            ? h('ul', { class: 'op-list' }, past.map((op) => h('li', {},
              h('a', { href: routeHref('operations', op.id) }, KIND_TITLES[op.kind] || words(op.kind)), ' ', badge(op.status), ' ', timeEl(op.created_at))))
            : h('p', { class: 'muted' }, 'None recorded by InstantStart.'))),
      detailSlot(nid),
      h('h4', {}, 'Read-only checks you can run'),
      h('pre', { class: 'commands', tabindex: '0', 'aria-label': 'Read-only kubectl commands' }, commands.join('\n')),
      h('h4', {}, 'Then, only if needed'),
      h('ol', { class: 'ladder' },
        h('li', { class: 'done' }, h('strong', {}, 'Investigate'), ' — the facts above; wait if HyperPod is already recovering the node.'),
        h('li', {}, h('strong', {}, 'Reboot'), ' — keeps local volumes; for a reachable but degraded node (hung process, transient GPU error). ',
          h('button', { type: 'button', class: 'btn small', dataset: { focusKey: `inv-reboot:${nid}` }, onclick: () => act('reboot', [nid]) }, 'Reboot…')),
        h('li', {}, h('strong', {}, 'Replace'), ' — a new instance; local volumes are lost. When a reboot did not help or the hardware is faulty. ',
          !rebooted && h('span', { class: 'muted small-text' }, 'Not rebooted by InstantStart yet. '),
          h('button', { type: 'button', class: 'btn small', dataset: { focusKey: `inv-replace:${nid}` }, onclick: () => act('replace', [nid]) }, 'Replace…'))),
      h('p', { class: 'muted small-text' }, 'Deleting the node shrinks its group by one; it is not a health fix. ',
        h('button', { type: 'button', class: 'btn small danger-outline', dataset: { focusKey: `inv-delete:${nid}` }, onclick: () => act('delete', [nid]) }, 'Delete node…')));
    panel.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && !document.querySelector('dialog[open]')) {
        e.preventDefault();
        closeActivity(nid);
      }
    });
    replace(activity, panel);
    if (!refresh) {
      panel.scrollIntoView({ block: 'nearest' });
      heading.focus({ preventScroll: true });
    }
  }

  /** The node's detail and latest events, read live when the panel opens. */
  function detailSlot(nid) {
    const slot = h('div', { class: 'node-detail', dataset: { nodeDetail: nid }, 'aria-live': 'polite' },
      h('p', { class: 'muted' }, 'Reading the node’s detail…'));
    const text = (v) => (v === null || v === undefined || v === '' ? h('span', { class: 'muted' }, '—') : v);
    Promise.all([
      api.get(`/api/clusters/${api.seg(name)}/nodes/${api.seg(nid)}`),
      nodeEvents(name, nid).catch(() => null),
    ]).then(([d, page]) => {
      const script = d.lifecycle_script && `${d.lifecycle_script.source_s3_uri.replace(/\/$/, '')}/${d.lifecycle_script.on_create}`;
      replace(slot,
        h('h4', {}, 'Node detail'),
        h('dl', { class: 'props', id: 'node-detail-props' },
          h('dt', {}, 'Status message'), h('dd', { dataset: { prop: 'status_message' } }, text(d.status_message)),
          h('dt', {}, 'Launched'), h('dd', { dataset: { prop: 'launch_time' } }, timeEl(d.launch_time)),
          h('dt', {}, 'Availability Zone'), h('dd', {}, text(d.availability_zone), d.availability_zone_id && h('span', { class: 'muted' }, ` (${d.availability_zone_id})`)),
          h('dt', {}, 'Private IP'), h('dd', { class: 'mono', dataset: { prop: 'private_ip' } }, text(d.private_ip)),
          h('dt', {}, 'Private DNS'), h('dd', { class: 'mono break' }, text(d.private_dns)),
          h('dt', {}, 'Capacity type'), h('dd', { dataset: { prop: 'capacity_type' } }, text(d.capacity_type)),
          h('dt', {}, 'Interface type'), h('dd', {}, text(d.interface_type)),
          h('dt', {}, 'Lifecycle script'), h('dd', { class: 'mono break' }, text(script)),
          h('dt', {}, 'AMI'), h('dd', {}, h('span', { class: 'mono' }, text(d.current_image_id)), d.image_version_status && h('span', { class: 'muted' }, ` · ${words(d.image_version_status)}`))),
        h('h4', {}, 'Latest events of this node'),
        page && page.events.length
          ? eventsTable(page.events, { withNode: false, id: 'node-events-table' })
          : h('p', { class: 'muted' }, page ? 'No events for this node.' : 'Its events could not be read.'));
    }).catch((err) => {
      if (err.status !== 401) replace(slot, h('p', { class: 'inline-error', role: 'alert' }, `${err.title}. ${err.message}`));
    });
    return slot;
  }

  // ---- reboot / replace / delete ------------------------------------------------------------

  async function act(action, ids) {
    if (!ids.length) return;
    const a = ACTIONS[action];
    if (ids.length > BATCH_LIMIT) {
      replace(activity, h('div', { class: 'notice warn', role: 'alert' }, `Select at most ${BATCH_LIMIT} nodes per action (${ids.length} selected).`));
      return;
    }
    const key = api.newIdempotencyKey();
    const many = ids.length > 1;
    const what = many ? plural(ids.length, 'node') : ids[0];
    const path = `/api/clusters/${api.seg(name)}/nodes/${action}`;
    const ackId = id('ack');
    const ack = a.loses && h('input', { type: 'checkbox', id: ackId, name: 'acknowledge_local_data_loss', dataset: { field: 'acknowledge_local_data_loss' } });
    const planSlot = h('div', { class: 'plan-mini', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Reading the plan…'));
    const refusalSlot = h('div', {});
    // The plan (steps) of this action; acknowledging here only lets the dry run describe it.
    api.post(path, { node_ids: ids, ...(a.loses ? { acknowledge_local_data_loss: true } : {}) }, { query: { dry_run: true } })
      .then(({ data }) => replace(planSlot, h('p', {}, 'These steps will run:'), stepList(data.steps)))
      .catch((err) => replace(planSlot, h('p', { class: 'inline-error' }, err.message)));
    const notRebooted = action === 'replace' && ids.filter((nid) => !historyOf(nid).some((op) => op.kind === 'reboot_nodes' && op.status === 'succeeded'));
    const rebootInstead = h('button', {
      type: 'button', class: 'btn small',
      onclick: (e) => {
        e.target.closest('dialog').close('cancel');
        setTimeout(() => act('reboot', ids), 0);
      },
    }, 'Reboot instead');
    const text = (many ? {
      reboot: 'The nodes restart in place: jobs on them are interrupted, their local volumes are kept. They are back in Running after a few minutes.',
      replace: 'HyperPod terminates the instances and launches new ones in the same groups (new instance ids). Jobs on them are interrupted.',
      delete: 'The instances are terminated and their groups shrink accordingly. Jobs on them are interrupted.',
    } : {
      reboot: 'The node restarts in place: jobs on it are interrupted, its local volumes are kept. It is back in Running after a few minutes.',
      replace: 'HyperPod terminates the instance and launches a new one in the same group (a new instance id). Jobs on it are interrupted.',
      delete: 'The instance is terminated and its group shrinks by one. Jobs on it are interrupted.',
    })[action];
    const body = h('div', { class: 'dialog-fields' },
      h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' }),
      h('p', {}, text),
      h('ul', { class: 'node-list', 'aria-label': 'Nodes' }, ids.map((nid, i) => {
        const n = st.nodes.find((x) => x.instance_id === nid);
        return h('li', { class: 'field', dataset: { field: `node_ids[${i}]` } },
          h('span', {}, h('span', { class: 'mono' }, nid), n && h('span', { class: 'muted' }, ` · ${n.instance_group} · ${n.instance_type} · `), n && statusBadge(n.status)));
      })),
      notRebooted && notRebooted.length > 0 && h('div', { class: 'notice reboot-first', role: 'note' },
        h('p', {}, h('strong', {}, 'Reboot first? '),
          `${many ? `${plural(notRebooted.length, 'node')} of these were` : 'This node was'} not rebooted by InstantStart yet; a reboot keeps local volumes (investigate → reboot → replace).`),
        rebootInstead),
      planSlot,
      a.loses && h('div', { class: 'field check ack' }, ack,
        h('label', { for: ackId }, h('strong', {}, `Local volumes on ${many ? 'these nodes' : 'this node'} will be lost`),
          h('span', { class: 'muted' }, ' (instance store, /opt/dlami/nvme). I have copied what I need from them.'))),
      refusalSlot);
    const op = await openDialog({
      title: `${a.verb} ${what}?`,
      body,
      confirmLabel: `${a.verb} ${many ? plural(ids.length, 'node') : 'node'}`,
      danger: a.loses,
      className: 'node-dialog',
      onConfirm: async (form) => {
        clearFindings(form);
        const req = { node_ids: ids };
        if (a.loses) req.acknowledge_local_data_loss = ack.checked;
        return submitFromDialog(form, refusalSlot, path, req, key);
      },
    });
    if (!op) return;
    for (const nid of ids) st.selected.delete(nid);
    renderTable();
    followOperation(activity, op, { title: `${a.verb} ${what}`, speed, onSettled: () => reload(), onClose: () => closeActivity(ids[0]) });
  }

  // ---- deep health checks on demand ---------------------------------------------------------

  /** StartClusterHealthCheck on the selected nodes, grouped by instance group. */
  async function healthCheck(ids) {
    if (!ids.length) return;
    const byGroup = new Map();
    for (const nid of ids) {
      const n = st.nodes.find((x) => x.instance_id === nid);
      if (!n) continue;
      if (!byGroup.has(n.instance_group)) byGroup.set(n.instance_group, []);
      byGroup.get(n.instance_group).push(nid);
    }
    const key = api.newIdempotencyKey();
    const path = `/api/clusters/${api.seg(name)}/health-checks`;
    const stressId = id('chk');
    const connId = id('chk');
    const stress = h('input', { type: 'checkbox', id: stressId, checked: true, value: 'InstanceStress' });
    const conn = h('input', { type: 'checkbox', id: connId, value: 'InstanceConnectivity' });
    const refusalSlot = h('div', {});
    const body = h('div', { class: 'dialog-fields' },
      h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' }),
      h('p', {}, 'SageMaker runs deep health checks on these nodes. While they run the nodes show DeepHealthCheckInProgress and take no work (tens of minutes on large accelerators); a node that fails is rebooted or replaced when node recovery is Automatic, else it shows Failure.'),
      h('ul', { class: 'node-list', 'aria-label': 'Nodes by instance group' },
        [...byGroup].map(([g, nodes], i) => h('li', { class: 'field', dataset: { field: `instance_groups[${i}]` } },
          h('strong', {}, g), ': ', h('span', { class: 'mono' }, nodes.join(', '))))),
      h('fieldset', { class: 'field', dataset: { field: 'instance_groups[0].checks' } },
        h('legend', {}, 'Checks'),
        h('div', { class: 'field check' }, stress, h('label', { for: stressId }, 'Accelerator stress (InstanceStress)')),
        h('div', { class: 'field check' }, conn, h('label', { for: connId }, 'EFA connectivity (InstanceConnectivity; needs an instance type with EFA)'))),
      refusalSlot);
    const op = await openDialog({
      title: `Run deep health checks on ${plural(ids.length, 'node')}?`,
      body,
      confirmLabel: 'Start health checks',
      className: 'health-check-dialog',
      onConfirm: async (form) => {
        clearFindings(form);
        const checks = [stress, conn].filter((c) => c.checked).map((c) => c.value);
        const req = { instance_groups: [...byGroup].map(([g, nodes]) => ({ name: g, node_ids: nodes, checks })) };
        return submitFromDialog(form, refusalSlot, path, req, key);
      },
    });
    if (!op) return;
    for (const nid of ids) st.selected.delete(nid);
    renderTable();
    followOperation(activity, op, { title: `Deep health checks on ${plural(ids.length, 'node')}`, speed, onSettled: () => reload(), onClose: () => closeActivity(ids[0]) });
  }

  return { el, update, investigate, act, healthCheck };
}

/** Posts a dialog's request; a refusal shows in the dialog (findings beside their fields, any
 * other problem in `refusalSlot`) and is rethrown so the dialog stays open. Answers the
 * operation the server started. */
async function submitFromDialog(form, refusalSlot, path, req, key) {
  replace(refusalSlot);
  try {
    const { data } = await api.post(path, req, { idempotencyKey: key });
    return data.operation;
  } catch (err) {
    if (err.findings.length) {
      showFindings(form, err, { compact: true });
      err.shown = true;
    } else if (err.status !== 401) {
      replace(refusalSlot, refusal(err));
      err.shown = true;
    }
    throw err;
  }
}

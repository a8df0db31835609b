// Clusters: list with status, region and the active marker; switch the active cluster; import
// an existing EKS cluster; delete with a type-the-name confirmation. The list refreshes when an
// operation changes (WebSocket), not on a timer.

import { h, replace, routeHref, timeEl, words, debounce, announce } from '../lib/dom.js';
import * as api from '../lib/api.js';
import { badge } from '../components/status-badge.js';
import { openDialog } from '../components/dialog.js';
import { showFindings, clearFindings } from '../lib/forms.js';
import { deleteDialog } from '../components/cluster-delete.js';

export function clustersView({ app }) {
  const tableSlot = h('div', { class: 'table-slot', 'aria-live': 'polite', 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Loading clusters…'));
  const errorBox = h('div', { class: 'notice bad', role: 'alert', hidden: true });
  const el = h('section', { class: 'view' },
    h('div', { class: 'view-head' },
      h('h1', {}, 'Clusters'),
      h('div', { class: 'view-actions' },
        h('button', { type: 'button', class: 'btn', onclick: () => importDialog(app) }, 'Import existing EKS…'),
        h('a', { class: 'btn primary', href: '#/clusters/new' }, 'Create cluster'))),
    h('p', { class: 'lede muted' }, 'EKS clusters with their HyperPod clusters. The active cluster is the one jobs, storage and features act on.'),
    errorBox,
    tableSlot);

  async function load() {
    try {
      const clusters = await api.list('/api/clusters');
      errorBox.hidden = true;
      render(clusters);
    } catch (err) {
      if (err.status === 401) return;
      errorBox.hidden = false;
      replace(errorBox, h('strong', {}, `${err.title}. `), err.message);
    } finally {
      tableSlot.removeAttribute('aria-busy');
    }
  }

  function render(clusters) {
    if (!clusters.length) {
      replace(tableSlot, h('div', { class: 'empty card' },
        h('h2', {}, 'No clusters yet'),
        h('p', {}, 'Create an EKS cluster with HyperPod in one form, or import an EKS cluster you already have.'),
        h('div', { class: 'actions' },
          h('a', { class: 'btn primary', href: '#/clusters/new' }, 'Create cluster'),
          h('button', { type: 'button', class: 'btn', onclick: () => importDialog(app) }, 'Import existing EKS…'))));
      return;
    }
    const rows = clusters.map((c) => h('tr', { dataset: { cluster: c.name, status: c.status, active: String(c.active) } },
      h('th', { scope: 'row' }, h('a', { href: routeHref('clusters', c.name) }, c.name)),
      h('td', {}, badge(c.status)),
      h('td', {}, c.region),
      h('td', {}, words(c.source)),
      h('td', {}, c.kubernetes_version || h('span', { class: 'muted' }, '—')),
      h('td', { class: 'nowrap' }, c.active
        ? h('span', { class: 'active-marker' }, h('span', { 'aria-hidden': 'true' }, '★ '), 'Active')
        : h('button', {
          type: 'button', class: 'btn small', 'aria-label': `Make ${c.name} the active cluster`,
          onclick: (e) => setActive(c.name, e.currentTarget),
        }, 'Make active')),
      h('td', {}, c.last_operation
        ? h('a', { href: routeHref('operations', c.last_operation.id) }, words(c.last_operation.kind), ' ', badge(c.last_operation.status))
        : h('span', { class: 'muted' }, '—')),
      h('td', { class: 'nowrap' }, timeEl(c.created_at)),
      h('td', { class: 'nowrap actions-cell' },
        h('button', {
          type: 'button', class: 'btn small danger-outline', 'aria-label': `Delete ${c.name}…`,
          onclick: () => deleteDialog(app, c),
        }, 'Delete…'))));
    replace(tableSlot, h('div', { class: 'table-wrap' }, h('table', { class: 'table', id: 'clusters-table' },
      h('caption', { class: 'visually-hidden' }, 'Clusters'),
      h('thead', {}, h('tr', {},
        ['Name', 'Status', 'Region', 'Source', 'Kubernetes', 'Active', 'Last operation', 'Created', ''].map((t) => h('th', { scope: 'col' }, t || h('span', { class: 'visually-hidden' }, 'Actions'))))),
      h('tbody', {}, rows))));
  }

  async function setActive(name, btn) {
    btn.disabled = true;
    try {
      await api.put('/api/active-cluster', { name });
      announce(`${name} is now the active cluster`);
      await app.refreshContext();
      await load();
      tableSlot.querySelector(`tr[data-cluster="${CSS.escape(name)}"] .active-marker`)?.closest('tr')?.querySelector('a')?.focus();
    } catch (err) {
      btn.disabled = false;
      errorBox.hidden = false;
      replace(errorBox, h('strong', {}, `${err.title}. `), err.message);
    }
  }

  const reload = debounce(load, 150);
  const stream = new api.OperationStream({ onOperation: reload }).start();
  load();
  return {
    el,
    title: 'Clusters',
    dispose() {
      stream.stop();
      reload.cancel();
    },
  };
}

/** Import an existing EKS (and HyperPod) cluster: a small form, then the operation. */
export async function importDialog(app) {
  const region = app.context?.default_region || 'us-east-1';
  const key = api.newIdempotencyKey();
  const field = (name, label, attrs = {}, help) => h('div', { class: 'field' },
    h('label', { for: `imp-${name}` }, label),
    h('input', { id: `imp-${name}`, name, autocomplete: 'off', spellcheck: 'false', dataset: { field: name }, ...attrs }),
    help && h('p', { class: 'help' }, help));
  const fields = h('div', { class: 'dialog-fields' },
    h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' }),
    field('name', 'InstantStart name', { required: true }, 'How this control plane will call the cluster.'),
    field('region', 'Region', { value: region, required: true }),
    field('eks_cluster', 'EKS cluster name', { required: true, list: 'imp-eks-list' }),
    h('datalist', { id: 'imp-eks-list' }),
    h('ul', { class: 'help', id: 'imp-eks-found', 'aria-live': 'polite' }),
    field('hyperpod_cluster', 'HyperPod cluster name (optional)', {}, 'A HyperPod cluster orchestrated by that EKS cluster, if any.'),
    field('bucket', 'S3 bucket (optional)', {},
      'Mounted in pods at /s3 as the claim s3-shared (created if it does not exist). Tiered checkpointing and the inference operator need it.'));
  // What the region has: the EKS clusters, their HyperPod clusters, which are managed already.
  let found = [];
  const describe = (c) => {
    const bits = [`Kubernetes ${c.version}`];
    if (c.hyperpod_clusters.length) bits.push(`HyperPod ${c.hyperpod_clusters.join(', ')}`);
    bits.push(c.managed_as.length ? `managed as ${c.managed_as.map((m) => m.name).join(', ')}` : 'not managed');
    if (c.authentication_mode === 'CONFIG_MAP') bits.push('aws-auth only: switch to API_AND_CONFIG_MAP to import');
    else bits.push(c.control_plane_access ? 'control plane has access' : 'an access entry will be created');
    return `${c.name} — ${bits.join(' · ')}`;
  };
  async function loadClusters() {
    const r = fields.querySelector('[name="region"]').value.trim();
    const list = fields.querySelector('#imp-eks-found');
    try {
      found = await api.get('/api/context/eks-clusters', { query: { region: r } });
      replace(fields.querySelector('#imp-eks-list'), found.map((c) => h('option', { value: c.name }, describe(c))));
      replace(list, found.length ? found.map((c) => h('li', {}, describe(c))) : h('li', {}, `No EKS clusters in ${r}.`));
    } catch (err) {
      replace(list, h('li', { class: 'inline-error' }, `Could not list the EKS clusters of ${r}: ${err.message}`));
    }
  }
  fields.querySelector('[name="region"]').addEventListener('change', loadClusters);
  fields.querySelector('[name="eks_cluster"]').addEventListener('change', (e) => {
    const c = found.find((x) => x.name === e.target.value.trim());
    const hp = fields.querySelector('[name="hyperpod_cluster"]');
    if (c && c.hyperpod_clusters.length === 1 && !hp.value) hp.value = c.hyperpod_clusters[0];
  });
  loadClusters();
  const op = await openDialog({
    title: 'Import an existing EKS cluster',
    body: [h('p', { class: 'muted' }, 'The control plane checks that the clusters exist, gives its IAM role an EKS access entry (unless one maps it already), installs the add-ons and charts InstantStart needs that are missing (those already installed are left alone), mounts the bucket if you name one, and registers them.'), fields],
    confirmLabel: 'Import',
    onConfirm: async (form) => {
      clearFindings(form);
      const v = (n) => form.querySelector(`[name="${n}"]`).value.trim();
      const body = { name: v('name'), region: v('region'), eks_cluster: v('eks_cluster') };
      if (v('hyperpod_cluster')) body.hyperpod_cluster = v('hyperpod_cluster');
      if (v('bucket')) body.bucket = v('bucket');
      try {
        const { data } = await api.post('/api/clusters/import', body, { idempotencyKey: key });
        return data.operation;
      } catch (err) {
        if (err.findings.length) {
          showFindings(form, err);
          err.shown = true;
          throw err;
        }
        throw err;
      }
    },
  });
  if (op) app.navigate(`#/operations/${encodeURIComponent(op.id)}`);
}


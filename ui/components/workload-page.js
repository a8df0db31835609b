// Shared pieces of the workload screens (storage, downloads, training jobs, endpoints, pools):
// the tab bar under a cluster's name, the "which cluster?" chooser behind the top-level nav
// links, the instance-type choices of a cluster, the rendered-manifest review of a dry run and the typed delete confirmation.
// The server decides everything; these only show and send.

import { h, replace, id, routeHref, words } from '../lib/dom.js';
import * as api from '../lib/api.js';
import { openDialog } from './dialog.js';
import { badge } from './status-badge.js';
import { regionContext, refusal } from './plan.js';
import { showFindings, clearFindings, FINDING_PREFIXES } from '../lib/forms.js';
import { typeLabel } from '../lib/instance-types.js';

/** The tabs of a cluster's pages. `current`: overview | storage | jobs | endpoints. */
export function clusterTabs(cluster, current) {
  const tab = (key, text, href) => h('a', {
    href, class: 'tab', 'aria-current': key === current ? 'page' : null, dataset: { tab: key },
  }, text);
  return h('nav', { class: 'tabs', 'aria-label': `Cluster ${cluster}` },
    tab('overview', 'Overview', routeHref('clusters', cluster)),
    tab('storage', 'Storage', routeHref('clusters', cluster, 'storage')),
    tab('jobs', 'Training jobs', routeHref('clusters', cluster, 'jobs')),
    tab('endpoints', 'Endpoints', routeHref('clusters', cluster, 'endpoints')));
}

/** Heading block of a workload page: the cluster link, the title, actions, then the tabs. */
export function workloadHead(cluster, current, title, ...actions) {
  return h('div', { class: 'workload-head' },
    h('p', { class: 'crumbs muted' }, h('a', { href: '#/clusters' }, 'Clusters'), ' / ',
      h('a', { href: routeHref('clusters', cluster) }, cluster)),
    h('div', { class: 'view-head' }, h('h1', {}, title), h('div', { class: 'view-actions' }, actions)),
    clusterTabs(cluster, current));
}

/**
 * The top-level "Storage", "Training jobs" and "Endpoints" links: open that page of the active
 * cluster, or ask which cluster when none is active.
 */
export function activeClusterView(section, title) {
  return ({ app }) => {
    const active = app.context && app.context.active_cluster;
    if (active) {
      setTimeout(() => app.navigate(routeHref('clusters', active, section), { replace: true }), 0);
      return { el: h('section', { class: 'view' }, h('h1', {}, title), h('p', { class: 'muted' }, `Opening ${active}…`)), title };
    }
    const slot = h('div', { 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Loading clusters…'));
    const el = h('section', { class: 'view' },
      h('h1', {}, title),
      h('p', { class: 'lede muted' }, 'No cluster is active. Choose the cluster to work on (the Clusters page can make one active).'),
      slot);
    api.list('/api/clusters').then((clusters) => {
      replace(slot, clusters.length
        ? h('ul', { class: 'op-list', id: 'cluster-choice' }, clusters.map((c) => h('li', {},
          h('a', { href: routeHref('clusters', c.name, section) }, c.name), ' ', badge(c.status), ' ', h('span', { class: 'muted' }, c.region))))
        : h('p', {}, 'No clusters yet. ', h('a', { href: '#/clusters/new' }, 'Create one'), '.'));
    }).catch((err) => {
      replace(slot, h('div', { class: 'notice bad', role: 'alert' }, h('strong', {}, `${err.title}. `), err.message));
    }).finally(() => slot.removeAttribute('aria-busy'));
    return { el, title };
  };
}

// ---- form fields ---------------------------------------------------------------------------

/**
 * Instance-type options for a workload: the cluster's own instance groups first (that is where
 * the pods run), then the other HyperPod types of the region.
 */
export async function instanceTypeOptions(select, cluster, keep) {
  let groups = [];
  let region = null;
  try {
    const c = await api.get(`/api/clusters/${api.seg(cluster)}`);
    region = c.region;
    groups = (c.hyperpod ? c.hyperpod.instance_groups : []).map((g) => g.instance_type);
  } catch { /* the region list alone */ }
  let types = [];
  if (region) {
    try {
      types = (await regionContext(region)).types;
    } catch { /* the groups alone */ }
  }
  const byName = new Map(types.map((t) => [t.instance_type, t]));
  const own = [...new Set(groups)];
  const accel = (t) => t.info && t.info.accelerators > 0;
  const others = types.filter((t) => !own.includes(t.instance_type) && accel(t));
  const choice = keep && (own.includes(keep) || byName.has(keep)) ? keep
    : own.find((n) => byName.get(n) && accel(byName.get(n))) || own[0] || others[0]?.instance_type || '';
  const opt = (name) => h('option', { value: name, selected: name === choice }, byName.has(name) ? typeLabel(byName.get(name)) : name);
  replace(select,
    own.length ? h('optgroup', { label: 'Instance groups of this cluster' }, own.map(opt)) : null,
    others.length ? h('optgroup', { label: 'Other accelerated HyperPod types' }, others.map((t) => opt(t.instance_type))) : null,
    !own.length && !others.length ? h('option', { value: '' }, 'No instance types known') : null);
  return byName;
}

// ---- dry-run review ------------------------------------------------------------------------

/** The rendered Kubernetes objects inside a dry run's recorded request, wherever they sit. */
export function renderedObjects(dry) {
  const seen = new Set();
  const found = [];
  const walk = (v, depth) => {
    if (!v || typeof v !== 'object' || depth > 6 || seen.has(v)) return;
    seen.add(v);
    if (Array.isArray(v)) {
      if (v.length && v.every((o) => o && typeof o === 'object' && o.apiVersion && o.kind)) {
        found.push(...v);
        return;
      }
      for (const x of v) walk(x, depth + 1);
      return;
    }
    if (v.apiVersion && v.kind && v.metadata) {
      found.push(v);
      return;
    }
    for (const x of Object.values(v)) walk(x, depth + 1);
  };
  walk(dry && (dry.objects || dry.manifests || dry.request), 0);
  return found;
}

/** Minimal YAML of a JSON value, for reading manifests (not for round-tripping). */
export function yaml(v, indent = '') {
  const scalar = (x) => {
    if (x === null || x === undefined) return 'null';
    if (typeof x === 'string') return /^[\w./@:-][\w ./@:=,+-]*$/.test(x) && !/^(true|false|null|yes|no|\d[\d.]*)$/i.test(x) && !/:\s|\s$/.test(x)
      ? x : JSON.stringify(x);
    return String(x);
  };
  if (Array.isArray(v)) {
    if (!v.length) return '[]';
    return v.map((x) => {
      if (x && typeof x === 'object' && (Array.isArray(x) ? x.length : Object.keys(x).length)) {
        const inner = yaml(x, `${indent}  `);
        return `${indent}- ${inner.slice(indent.length + 2)}`;
      }
      return `${indent}- ${x && typeof x === 'object' ? (Array.isArray(x) ? '[]' : '{}') : scalar(x)}`;
    }).join('\n');
  }
  if (v && typeof v === 'object') {
    const keys = Object.keys(v);
    if (!keys.length) return '{}';
    return keys.map((k) => {
      const x = v[k];
      const key = /^[\w./-]+$/.test(k) ? k : JSON.stringify(k);
      if (x && typeof x === 'object' && (Array.isArray(x) ? x.length : Object.keys(x).length)) {
        return `${indent}${key}:\n${yaml(x, Array.isArray(x) ? indent : `${indent}  `)}`;
      }
      return `${indent}${key}: ${x && typeof x === 'object' ? (Array.isArray(x) ? '[]' : '{}') : scalar(x)}`;
    }).join('\n');
  }
  return `${indent}${scalar(v)}`;
}

/** The manifests as collapsible YAML blocks, one per object. */
export function manifestList(objects, { open = false } = {}) {
  if (!objects.length) return h('p', { class: 'muted' }, 'No manifests in the answer.');
  return h('div', { class: 'manifests' }, objects.map((o, i) => h('details', {
    class: 'manifest', open: open && i === 0, dataset: { kind: o.kind, name: o.metadata?.name || '' },
  },
  h('summary', {}, h('span', { class: 'mono' }, `${o.kind}/${o.metadata?.name || '?'}`),
    h('span', { class: 'muted' }, ` · ${o.apiVersion}${o.metadata?.namespace ? ` · ${o.metadata.namespace}` : ''}`)),
  h('pre', { class: 'yaml' }, yaml(o)))));
}

/**
 * The volumes a workload's pods mount (`volumes` of a job or endpoint view), one line each:
 * where the containers see it, the volume (an FSx for Lustre one links to the Storage tab),
 * its kind, and read-only when it is. `null` (nothing shown) when there are none.
 */
export function mountedVolumes(cluster, volumes, listId) {
  if (!Array.isArray(volumes) || !volumes.length) return null;
  const kinds = { s3: 'S3 bucket', fsx_lustre: 'FSx for Lustre' };
  return h('ul', { class: 'op-list', id: listId }, volumes.map((v) => h('li', { dataset: { volume: v.volume, mountPath: v.mount_path } },
    h('span', { class: 'mono' }, v.mount_path), ' ← ',
    v.kind === 'fsx_lustre'
      ? h('a', { href: routeHref('clusters', cluster, 'storage'), class: 'mono' }, v.volume)
      : h('span', { class: 'mono' }, v.volume),
    ' ', badge(kinds[v.kind] || `claim ${v.claim}`, 'muted'),
    v.read_only ? [' ', badge('read-only', 'muted')] : null)));
}

/** Steps of a dry run as a compact ordered list. */
export function stepsList(steps) {
  return h('ol', { class: 'plan-steps compact' }, (steps || []).map((s) => h('li', { dataset: { stepKey: s.key } }, s.title || s.key)));
}

/**
 * The submit form of a workload with its plan review: "Review plan" posts the request with
 * ?dry_run=true and shows the steps, the rendered manifests and the request body; the apply
 * button posts the same request again under one idempotency key and opens the workload's page
 * following the operation. Editing the form drops the plan. Findings land on the fields.
 * kind: `job` | `endpoint` (the ids `<kind>-form`, `<kind>-review`, `<kind>-plan`);
 * section: the cluster tab (`jobs` | `endpoints`); fields: the form's controls;
 * body(form): the request; nameOf(body): the workload's name when the answer has none;
 * apply: { id, label } of the apply button; lede: what follows "These N objects will be ".
 * Returns the form and the slot for refusals of the apply.
 */
export function planReviewForm({ app, cluster, kind, section, base, fields, body, nameOf, apply, lede }) {
  let planned = null;
  let planKey = null;

  const summary = h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' });
  const reviewBtn = h('button', { type: 'submit', class: 'btn primary', id: `${kind}-review` }, 'Review plan');
  const planSlot = h('div', { class: 'plan-slot', 'aria-live': 'polite' });
  const activity = h('div', { class: 'activity-slot' });
  const form = h('form', { class: 'card editor-form', id: `${kind}-form`, novalidate: true },
    summary, ...fields,
    h('div', { class: 'form-actions' }, reviewBtn, h('a', { href: routeHref('clusters', cluster, section) }, 'Cancel')),
    planSlot);

  form.addEventListener('input', () => {
    if (planned) {
      planned = null;
      replace(planSlot, h('p', { class: 'notice muted', role: 'status' }, 'The form changed; review the plan again.'));
    }
  });
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearFindings(form);
    const request = body(form);
    reviewBtn.disabled = true;
    reviewBtn.setAttribute('aria-busy', 'true');
    try {
      const { data } = await api.post(base, request, { query: { dry_run: true } });
      planned = request;
      planKey = api.newIdempotencyKey();
      showPlan(data, request);
    } catch (err) {
      if (err.status === 401) return;
      if (err.findings.length || err.status === 400 || err.status === 422) showFindings(form, err, { prefixes: FINDING_PREFIXES });
      else replace(planSlot, refusal(err));
    } finally {
      reviewBtn.disabled = false;
      reviewBtn.removeAttribute('aria-busy');
    }
  });

  function showPlan(dry, request) {
    const objects = renderedObjects(dry);
    const applyBtn = h('button', { type: 'button', class: 'btn primary', id: apply.id }, apply.label);
    const heading = h('h2', { tabindex: '-1' }, 'Plan');
    replace(planSlot, h('section', { class: 'review plan', id: `${kind}-plan` },
      heading,
      h('p', {}, `These ${objects.length} object${objects.length === 1 ? '' : 's'} will be ${lede}:`),
      stepsList(dry.steps),
      h('h3', {}, 'Rendered manifests'),
      manifestList(objects, { open: true }),
      h('details', { class: 'json' }, h('summary', {}, 'Request body'), h('pre', {}, JSON.stringify(request, null, 2))),
      h('div', { class: 'form-actions' }, applyBtn)));
    heading.focus();
    applyBtn.addEventListener('click', async () => {
      applyBtn.disabled = true;
      applyBtn.setAttribute('aria-busy', 'true');
      try {
        const { data } = await api.post(base, planned, { idempotencyKey: planKey });
        const name = data.workload ? data.workload.name : nameOf(planned);
        app.navigate(`${routeHref('clusters', cluster, section, name)}?op=${encodeURIComponent(data.operation.id)}`);
      } catch (err) {
        if (err.status === 401) return;
        if (err.findings.length) showFindings(form, err, { prefixes: FINDING_PREFIXES });
        else replace(activity, refusal(err));
        applyBtn.disabled = false;
        applyBtn.removeAttribute('aria-busy');
      }
    });
  }

  return { form, activity };
}

// ---- status bits ---------------------------------------------------------------------------

/** Phase badge for a workload phase (pending/running/succeeded/failed/restarting/ready…). */
export function phaseBadge(phase) {
  const p = String(phase || 'unknown').toLowerCase();
  if (p === 'restarting') return badge(p, 'warn', '↻');
  if (p === 'completed' || p === 'complete') return badge(p, 'ok');
  return badge(p);
}

/** The words of the read-only marker of a workload InstantStart did not create. */
export const FOREIGN_TITLE = 'Not created by InstantStart: listed read-only. Manage it with the tool that created it.';

/** The "foreign" badge of a workload InstantStart did not create (`foreign: true`). */
export function foreignBadge() {
  // The badge element owns its class list; the marker class and tooltip go on a wrapper.
  return h('span', { class: 'foreign-badge', title: FOREIGN_TITLE }, badge('foreign', 'muted'),
    h('span', { class: 'visually-hidden' }, ` — ${FOREIGN_TITLE}`));
}

/** The recovery budget as a meter plus words: "1 of 3 used · 2 left". */
export function recoveryMeter(recovery) {
  if (!recovery) return h('span', { class: 'muted', title: 'This runtime has no recovery budget' }, '—');
  const budget = Number(recovery.budget) || 0;
  const used = Number(recovery.used) || 0;
  const remaining = recovery.remaining ?? Math.max(0, budget - used);
  const low = budget > 0 && remaining === 0;
  return h('span', { class: `recovery${low ? ' exhausted' : ''}`, dataset: { used: String(used), remaining: String(remaining), budget: String(budget) } },
    h('meter', {
      min: 0, max: Math.max(1, budget), value: used, low: Math.max(1, budget) * 0.5, high: Math.max(1, budget) * 0.99, optimum: 0,
      'aria-label': `Recovery budget: ${used} of ${budget} restarts used`,
    }),
    ' ', h('span', { class: 'counts' }, `${used} / ${budget} used`), ' ',
    h('span', { class: low ? 'tone-text-bad' : 'muted' }, `· ${remaining} left`));
}

/** Pod counts {pending, running, succeeded, failed} as short text. */
export function podCounts(pods) {
  if (!pods || typeof pods !== 'object' || Array.isArray(pods)) return h('span', { class: 'muted' }, '—');
  const parts = ['running', 'pending', 'succeeded', 'failed'].filter((k) => pods[k]).map((k) => `${pods[k]} ${k}`);
  return h('span', { class: 'counts' }, parts.length ? parts.join(', ') : 'none');
}

/** Confirms a delete by typing the name; resolves the accepted operation or null. */
export function confirmDelete({ what, name, detail, run }) {
  return openDialog({
    title: `Delete ${what} ${name}?`,
    body: [h('p', {}, detail)],
    confirmLabel: `Delete ${what}`,
    danger: true,
    typeToConfirm: name,
    onConfirm: async () => run(),
  });
}

/**
 * Deletes a workload once its name is typed: DELETE `path` under a fresh idempotency key.
 * Resolves the accepted operation, or null when cancelled or refused (the refusal is shown
 * in `activity`).
 */
export function confirmedDelete({ what, name, detail, path, activity }) {
  return confirmDelete({
    what, name, detail,
    run: async () => (await api.del(path, { idempotencyKey: api.newIdempotencyKey() })).data.operation,
  }).catch((err) => { replace(activity, refusal(err)); return null; });
}

// ---- list pages ----------------------------------------------------------------------------

/** The empty state of a list page: a heading, a sentence and the button that makes the first one. */
export function emptyList(title, text, href, action) {
  return h('div', { class: 'empty' },
    h('h2', {}, title),
    h('p', {}, text),
    h('div', { class: 'actions' }, h('a', { class: 'btn primary', href }, action)));
}

/** The table of a list page; an empty heading is the (visually hidden) actions column. */
export function listTable(tableId, caption, head, rows) {
  return h('div', { class: 'table-wrap' }, h('table', { class: 'table', id: tableId },
    h('caption', { class: 'visually-hidden' }, caption),
    h('thead', {}, h('tr', {}, head.map((t) => h('th', { scope: 'col' }, t || h('span', { class: 'visually-hidden' }, 'Actions'))))),
    h('tbody', {}, rows)));
}

/** Whether operation `op` acts on cluster `cluster` (targets cluster/<name>[/<kind>/<name>]). */
export function onCluster(op, cluster) {
  return op.target === `cluster/${cluster}` || String(op.target).startsWith(`cluster/${cluster}/`);
}

/** Words for a snake_case value, or a dash. */
export function show(v) {
  return v === null || v === undefined || v === '' ? h('span', { class: 'muted' }, '—') : words(v);
}

// Shared pieces of the day-2 screens (instance groups, nodes, features): the plan review of a
// dry run (server diff, steps, preflight checks), the inline progress panel an accepted change
// is followed on, and the notice for a refused request. The server decides; these only show.

import { h, replace, duration, words, announce, routeHref } from '../lib/dom.js';
import { ApiError, get } from '../lib/api.js';
import { badge } from './status-badge.js';
import { estimate } from '../lib/progress.js';

/** A server value for a diff line: on/off, "spot", "training plan arn:…", "none". */
export function showValue(v) {
  if (v === null || v === undefined) return 'none';
  if (v === true) return 'on';
  if (v === false) return 'off';
  if (typeof v === 'object') {
    if (v.type) return v.arn ? `${words(v.type)} ${v.arn}` : words(v.type);
    if ('memory_percent' in v) return `on, ${v.memory_percent}% of memory`;
    if ('min_replicas' in v && 'max_replicas' in v) return `${v.min_replicas}–${v.max_replicas} replicas${v.cooldown_seconds !== undefined ? `, cooldown ${v.cooldown_seconds} s` : ''}`;
    return JSON.stringify(v);
  }
  return words(v);
}

/** Diff lines: [{field, label, from, to}] → <ul class="diff">. */
export function diffList(lines) {
  return h('ul', { class: 'diff' }, lines.map((l) => h('li', { dataset: { field: l.field } },
    h('span', { class: 'diff-field' }, l.label), ' ',
    h('del', {}, l.from), h('span', { 'aria-hidden': 'true' }, ' → '), h('span', { class: 'visually-hidden' }, ' becomes '),
    h('ins', {}, l.to))));
}

/** The server's plan ({changes: [{field, from, to}]}) as diff lines; `labels` names fields. */
export function planLines(plan, labels = {}) {
  const changes = plan && Array.isArray(plan.changes) ? plan.changes : [];
  return changes.map((c) => ({ field: c.field, label: labels[c.field] || words(c.field), from: showValue(c.from), to: showValue(c.to) }));
}

/** About how long the steps take (critical path) at AWS speed and here. */
export function planTiming(steps, speed) {
  const fake = steps.map((s) => ({ ...s, phase: 'pending', started_at: null, finished_at: null }));
  const at = (sp) => estimate({ status: 'running', steps: fake }, sp, 0).remaining;
  const about = (ms) => (ms < 100 ? duration(ms) : `about ${duration(ms)}`);
  const here = speed ? at(speed) : null;
  return `${about(at(1))} at AWS speed${here !== null ? ` (${about(here)} on the simulated cloud at ${speed}×)` : ''}`;
}

/** Numbered steps of a dry run. */
export function stepList(steps) {
  return h('ol', { class: 'plan-steps compact' }, steps.map((s) => h('li', { dataset: { stepKey: s.key } },
    h('span', { class: 'plan-step-title' }, s.title),
    s.expected_secs ? h('span', { class: 'muted plan-step-meta' }, `~${duration(s.expected_secs * 1000)} at AWS speed`) : null)));
}

/** Preflight checks with status, detail and remedy. */
export function checkList(checks) {
  return h('ul', { class: 'checks-list' }, checks.map((c) => h('li', { dataset: { check: c.check, status: c.status, field: c.field } },
    badge(c.status), ' ', h('span', { class: 'check-name' }, words(c.check)),
    h('div', { class: 'check-detail' }, c.detail),
    c.remedy && h('div', { class: 'help remedy' }, h('strong', {}, 'Remedy: '), c.remedy))));
}

/** Failed preflight checks as an error whose findings land next to their fields. */
export function failedChecks(checks) {
  const failed = (checks || []).filter((c) => c.status === 'fail');
  if (!failed.length) return null;
  return new ApiError(422, {
    title: 'Preflight checks failed',
    findings: failed.map((c) => ({ field: c.field, rule: c.remedy ? `${c.detail} — ${c.remedy}` : c.detail })),
  });
}

/**
 * A refusal that is not about a field: 409 (another operation runs on this cluster, with a
 * link to it), or anything else, as a notice.
 */
export function refusal(err) {
  const opId = err.problem && err.problem.operation_id;
  return h('div', { class: `notice ${err.status === 409 ? 'warn' : 'bad'}`, role: 'alert' },
    h('strong', {}, `${err.title}. `), err.message,
    opId ? [' ', h('a', { href: routeHref('operations', opId) }, 'Open that operation')] : []);
}

/**
 * Follows an accepted operation in `slot`: a heading, the live progress panel (embedded),
 * and Close. `onSettled(op)` runs once when it stops running (any terminal status).
 */
export function followOperation(slot, operation, { title, speed, onSettled, onClose } = {}) {
  const progress = h('is-operation-progress', {
    'operation-id': operation.id, embedded: true, ...(speed ? { 'sim-speed': speed } : {}),
  });
  let settled = false;
  progress.addEventListener('operation', (e) => {
    const op = e.detail;
    if (settled || op.id !== operation.id || op.status === 'running') return;
    settled = true;
    if (onSettled) onSettled(op);
  });
  const heading = h('h3', { tabindex: '-1' }, title);
  const close = h('button', {
    type: 'button', class: 'btn small ghost', 'aria-label': `Close: ${title}`,
    onclick: () => { replace(slot); if (onClose) onClose(); },
  }, 'Close');
  // Escape closes the panel; the operation goes on (its page and the operations list keep it).
  const onKey = (e) => {
    if (e.key === 'Escape' && !document.querySelector('dialog[open]')) {
      e.preventDefault();
      close.click();
    }
  };
  const panel = h('div', { class: 'activity', dataset: { operation: operation.id } },
    h('div', { class: 'activity-head' }, heading,
      h('div', { class: 'activity-actions' },
        h('a', { href: routeHref('operations', operation.id), class: 'btn small ghost' }, 'Full page'), close)),
    progress);
  panel.addEventListener('keydown', onKey);
  replace(slot, panel);
  announce(`${title}: started`);
  heading.focus({ preventScroll: true });
  panel.scrollIntoView({ block: 'nearest' });
  return panel;
}

const regionCache = new Map();

/** Zones and HyperPod instance types (with their AZs) of a region, read once per page load. */
export function regionContext(region) {
  if (!regionCache.has(region)) {
    const p = Promise.all([
      get('/api/context/zones', { query: { region } }),
      get('/api/context/instance-types', { query: { region } }),
    ]).then(([zones, types]) => ({ zones, types }));
    p.catch(() => regionCache.delete(region));
    regionCache.set(region, p);
  }
  return regionCache.get(region);
}

/** A whole number when the text is one; otherwise the text, so the backend names the field. */
export function whole(text) {
  const t = String(text).trim();
  if (/^\d+$/.test(t)) return Number(t);
  return t === '' ? null : t;
}

export const CAPACITY_LABELS = { on_demand: 'On-demand', training_plan: 'Training plan', spot: 'Spot' };
export const INTERFACE_LABELS = { standard: 'Standard', efa_only: 'EFA-only' };

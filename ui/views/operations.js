// Operations and audit: recent operations with the face that asked (ui/cli/agent/api), their
// target and status; the audit log of who did what, when, with which diff.

import { h, replace, routeHref, timeEl, words, debounce, duration } from '../lib/dom.js';
import * as api from '../lib/api.js';
import { badge } from '../components/status-badge.js';
import { KIND_TITLES } from '../components/operation-progress.js';
import { operationElapsed } from '../lib/progress.js';

const STATUSES = ['running', 'succeeded', 'failed', 'needs_attention', 'cancelled'];

function face(actor) {
  if (!actor) return null;
  return h('span', { class: 'actor' },
    h('span', { class: `face face-${actor.face}`, title: `Says it came through the ${actor.face} face (claimed by the client; the token name is what authenticated)` }, actor.face),
    ' ', h('span', { class: 'muted' }, actor.principal));
}

export function operationsView() {
  const status = h('select', { id: 'ops-status' },
    h('option', { value: '' }, 'All statuses'),
    STATUSES.map((s) => h('option', { value: s }, words(s))));
  const opsSlot = h('div', { 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Loading operations…'));
  const auditSlot = h('div', { 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Loading the audit log…'));
  const errorBox = h('div', { class: 'notice bad', role: 'alert', hidden: true });

  // Pages of 50 newest first; "Load more" follows the list's next link (docs/rest-api.md,
  // "Lists") and a reload keeps as many pages as were shown.
  let pages = 1;
  async function loadOps() {
    try {
      let page = await api.page('/api/operations', { query: { limit: 50, status: status.value } });
      const ops = [...page.items];
      for (let i = 1; i < pages && page.next; i++) {
        page = await api.page(page.next);
        ops.push(...page.items);
      }
      opsSlot.removeAttribute('aria-busy');
      if (!ops.length) {
        replace(opsSlot, h('p', { class: 'muted' }, 'No operations yet.'));
        return;
      }
      const more = page.next && h('button', { type: 'button', class: 'btn', id: 'ops-more', onclick: () => { pages += 1; loadOps(); } }, 'Load more');
      replace(opsSlot, h('div', { class: 'table-wrap' }, h('table', { class: 'table', id: 'operations-table' },
        h('caption', { class: 'visually-hidden' }, 'Recent operations'),
        h('thead', {}, h('tr', {}, ['Operation', 'Target', 'Status', 'Asked by', 'Started', 'Duration', 'Steps'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, ops.map((op) => {
          const done = op.steps.filter((s) => s.phase === 'succeeded').length;
          return h('tr', { dataset: { operation: op.id, status: op.status, face: op.actor?.face } },
            h('th', { scope: 'row' }, h('a', { href: routeHref('operations', op.id) }, KIND_TITLES[op.kind] || words(op.kind)),
              h('div', { class: 'mono muted small-text' }, op.id)),
            h('td', { class: 'mono' }, op.target),
            h('td', {}, badge(op.status), op.error && h('div', { class: 'small-text muted clamp', title: op.error }, op.error)),
            h('td', {}, face(op.actor)),
            h('td', { class: 'nowrap' }, timeEl(op.created_at)),
            h('td', { class: 'nowrap' }, duration(operationElapsed(op))),
            h('td', { class: 'nowrap' }, `${done}/${op.steps.length}`));
        })))), more || null);
    } catch (err) {
      if (err.status === 401) return;
      errorBox.hidden = false;
      replace(errorBox, h('strong', {}, `${err.title}. `), err.message);
    }
  }

  async function loadAudit() {
    try {
      const entries = await api.get('/api/audit', { query: { limit: 100 } });
      auditSlot.removeAttribute('aria-busy');
      if (!entries.length) {
        replace(auditSlot, h('p', { class: 'muted' }, 'The audit log is empty.'));
        return;
      }
      replace(auditSlot, h('div', { class: 'table-wrap' }, h('table', { class: 'table', id: 'audit-table' },
        h('caption', { class: 'visually-hidden' }, 'Audit log'),
        h('thead', {}, h('tr', {}, ['When', 'Who', 'Action', 'Target', 'Operation', 'Detail'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, entries.map((a) => h('tr', { dataset: { action: a.action } },
          h('td', { class: 'nowrap' }, timeEl(a.at)),
          h('td', {}, face(a.actor)),
          h('td', { class: 'mono' }, a.action),
          h('td', { class: 'mono' }, a.target),
          h('td', {}, a.operation_id ? h('a', { class: 'mono', href: routeHref('operations', a.operation_id) }, a.operation_id.slice(0, 11) + '…') : h('span', { class: 'muted' }, '—')),
          h('td', {}, a.detail === null || a.detail === undefined
            ? h('span', { class: 'muted' }, '—')
            : h('details', { class: 'json' }, h('summary', {}, 'Show'), h('pre', {}, JSON.stringify(a.detail, null, 2))))))))));
    } catch (err) {
      if (err.status === 401) return;
      errorBox.hidden = false;
      replace(errorBox, h('strong', {}, `${err.title}. `), err.message);
    }
  }

  status.addEventListener('change', () => { pages = 1; loadOps(); });
  const reload = debounce(() => { loadOps(); loadAudit(); }, 300);
  const stream = new api.OperationStream({ onOperation: reload }).start();
  loadOps();
  loadAudit();

  const el = h('section', { class: 'view' },
    h('div', { class: 'view-head' }, h('h1', {}, 'Operations')),
    h('p', { class: 'lede muted' }, 'Every change made through the web UI, the CLI, an agent or the API is an operation of the same backend.'),
    errorBox,
    h('section', { class: 'card', 'aria-labelledby': 'ops-title' },
      h('div', { class: 'section-head' }, h('h2', { id: 'ops-title' }, 'Recent operations'),
        h('div', { class: 'field inline' }, h('label', { for: 'ops-status' }, 'Status'), status)),
      opsSlot),
    h('section', { class: 'card', 'aria-labelledby': 'audit-title' },
      h('h2', { id: 'audit-title' }, 'Audit log'),
      auditSlot));
  return { el, title: 'Operations', dispose() { stream.stop(); reload.cancel(); } };
}

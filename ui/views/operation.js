// One operation's live progress (#/operations/op-…). The id in the URL is all the state there
// is, so a reload (or a server restart) comes back to the same panel.

import { h, replace, routeHref } from '../lib/dom.js';
import { clusterOf, operationTitle } from '../components/operation-progress.js';

export function operationView({ app, params }) {
  const [opId] = params;
  const speed = app.simSpeed();
  const title = h('h1', {}, 'Operation');
  const links = h('div', { class: 'view-actions' });
  const request = h('details', { class: 'json card', hidden: true }, h('summary', {}, 'Request'), h('pre', {}));
  const progress = h('is-operation-progress', { 'operation-id': opId, ...(speed ? { 'sim-speed': speed } : {}) });
  let shown = null;
  progress.addEventListener('operation', (e) => {
    const op = e.detail;
    const cluster = clusterOf(op.target);
    const text = operationTitle(op);
    if (title.textContent !== text) {
      title.textContent = text;
      document.title = `${text} · InstantStart`;
    }
    if (shown !== op.target) {
      shown = op.target;
      replace(links,
        cluster && op.kind !== 'delete_cluster' && h('a', { class: 'btn', href: routeHref('clusters', cluster) }, `Cluster ${cluster}`),
        h('a', { class: 'btn', href: '#/operations' }, 'All operations'));
      request.hidden = false;
      request.querySelector('pre').textContent = JSON.stringify(op.request, null, 2);
    }
  });
  const el = h('section', { class: 'view' },
    h('div', { class: 'view-head' }, title, links),
    progress,
    request);
  return { el, title: `Operation ${opId}` };
}

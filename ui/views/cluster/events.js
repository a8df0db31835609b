// Events of a cluster's HyperPod cluster (cluster page): what HyperPod reported, newest first —
// status changes of the cluster, its instance groups and nodes, node launches, deep health
// checks, failures and replacements. Filters by resource type and instance group; "Show older
// events" follows the page's next_cursor. The first page is re-read when the cluster page
// refreshes (unless older pages are shown); the table is rebuilt only when the events changed.

import { h, replace, keepFocus } from '../../lib/dom.js';
import * as api from '../../lib/api.js';
import { eventsTable } from '../../components/events-table.js';

const PAGE = 25;

export function eventsSection({ name }) {
  const st = { groups: [], events: [], cursor: null, older: false, sig: null, loading: false };
  const resource = h('select', { id: 'events-resource', dataset: { focusKey: 'events-resource' }, onchange: () => reset() },
    h('option', { value: '' }, 'All resources'),
    h('option', { value: 'cluster' }, 'Cluster'),
    h('option', { value: 'instance_group' }, 'Instance groups'),
    h('option', { value: 'instance' }, 'Nodes'));
  const group = h('select', { id: 'events-group', dataset: { focusKey: 'events-group' }, onchange: () => reset() },
    h('option', { value: '' }, 'All instance groups'));
  const summary = h('span', { class: 'muted section-summary', role: 'status' });
  const tableSlot = h('div', { class: 'events-slot' }, h('p', { class: 'muted' }, 'Reading the events…'));
  const more = h('button', { type: 'button', class: 'btn small', id: 'events-older', hidden: true, onclick: () => older() }, 'Show older events');
  const el = h('section', { class: 'card', 'aria-labelledby': 'events-title', id: 'events-card', hidden: true },
    h('div', { class: 'section-head' }, h('h2', { id: 'events-title' }, 'Events'), summary),
    h('p', { class: 'help' }, 'What HyperPod reported, newest first: status changes of the cluster, its instance groups and nodes, deep health checks, failures and replacements.'),
    h('div', { class: 'filters', role: 'group', 'aria-label': 'Filter events' },
      h('label', { for: 'events-resource' }, 'Resource '), resource, ' ',
      h('label', { for: 'events-group' }, 'Instance group '), group),
    tableSlot, more);

  function query(cursor) {
    return { resource_type: resource.value, instance_group: group.value, limit: PAGE, cursor };
  }

  function render() {
    const sig = JSON.stringify([st.events.map((e) => e.event_id), !!st.cursor]);
    more.hidden = !st.cursor;
    summary.textContent = st.events.length ? `${st.events.length} shown${st.cursor ? ', more available' : ''}` : '';
    if (sig === st.sig) return;
    st.sig = sig;
    keepFocus(el, () => replace(tableSlot, st.events.length
      ? eventsTable(st.events, { id: 'events-table' })
      : h('p', { class: 'muted' }, 'No events yet.')));
  }

  async function load() {
    if (st.loading) return;
    st.loading = true;
    try {
      const page = await api.get(`/api/clusters/${api.seg(name)}/events`, { query: query() });
      st.events = page.events;
      st.cursor = page.next_cursor || null;
      st.older = false;
      render();
    } catch (err) {
      if (err.status === 401) return;
      st.sig = null;
      replace(tableSlot, h('p', { class: 'inline-error', role: 'alert' }, `${err.title}. ${err.message}`));
    } finally {
      st.loading = false;
    }
  }

  async function older() {
    if (!st.cursor) return;
    more.disabled = true;
    try {
      const page = await api.get(`/api/clusters/${api.seg(name)}/events`, { query: query(st.cursor) });
      st.events = st.events.concat(page.events);
      st.cursor = page.next_cursor || null;
      st.older = true;
      render();
    } catch (err) {
      if (err.status !== 401) replace(tableSlot, h('p', { class: 'inline-error', role: 'alert' }, `${err.title}. ${err.message}`));
    } finally {
      more.disabled = false;
      if (!more.hidden) more.focus({ preventScroll: true });
    }
  }

  function reset() {
    st.older = false;
    load();
  }

  /** The cluster page refreshed: new groups for the filter, and the newest events again. */
  function update(cluster) {
    el.hidden = !cluster.hyperpod_cluster;
    if (el.hidden) return;
    const names = (cluster.hyperpod ? cluster.hyperpod.instance_groups : []).map((g) => g.name);
    if (JSON.stringify(names) !== JSON.stringify(st.groups)) {
      st.groups = names;
      const chosen = group.value;
      replace(group, h('option', { value: '' }, 'All instance groups'),
        names.map((n) => h('option', { value: n, selected: n === chosen }, n)));
    }
    if (!st.older) load();
  }

  return { el, update };
}

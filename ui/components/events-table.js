// HyperPod events as a table (cluster events panel, node detail): one row per event with its
// level as a badge, and the read of one node's latest events.

import { h, timeEl, words } from '../lib/dom.js';
import * as api from '../lib/api.js';
import { badge } from './status-badge.js';

export const LEVEL_TONE = { info: 'muted', warn: 'warn', error: 'bad' };

export const LEVEL_GLYPH = { info: 'i', warn: '!', error: '✕' };

/** A node's latest events (node detail), newest first. */
export async function nodeEvents(cluster, nodeId, limit = 10) {
  return api.get(`/api/clusters/${api.seg(cluster)}/events`, { query: { node_id: nodeId, limit } });
}

/** An event level as a badge (text plus glyph). */
export function levelBadge(level) {
  return badge(level || 'info', LEVEL_TONE[level] || 'muted', LEVEL_GLYPH[level] || 'i');
}

/** Events as a table; `withNode` adds the Node column. */
export function eventsTable(events, { withNode = true, id } = {}) {
  const head = ['Time', 'Level', 'Resource', 'Instance group', withNode && 'Node', 'Description'].filter(Boolean);
  return h('div', { class: 'table-wrap' }, h('table', { class: 'table events-table', id },
    h('caption', { class: 'visually-hidden' }, 'Events, newest first'),
    h('thead', {}, h('tr', {}, head.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, events.map((e) => h('tr', { dataset: { event: e.event_id, level: e.level || 'info', resource: e.resource_type } },
      h('td', { class: 'nowrap' }, timeEl(e.time)),
      h('td', {}, levelBadge(e.level)),
      h('td', {}, words(e.resource_type)),
      h('td', {}, e.instance_group || h('span', { class: 'muted' }, '—')),
      withNode && h('td', { class: 'mono' }, e.instance_id || h('span', { class: 'muted' }, '—')),
      h('td', {}, e.description))))));
}

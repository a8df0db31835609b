// FSx for Lustre volumes in the workload forms (training jobs, model downloads, endpoints): the
// cluster's volumes (GET /api/clusters/{c}/storage, kind fsx_lustre) offered as choices, a
// ticked list with a mount path each (`job.volumes`, an endpoint's `volumes`) or one choice
// (a download's destination, an endpoint's model volume). A cluster without a volume gets a
// note linking to the Storage tab, never an empty control. Which volume can be mounted
// (AVAILABLE, its claim made, the workload's namespace) is the server's rule: its findings land
// on the rows here, whose data-field is `<field>[i].name` with i counting the ticked volumes in
// order, the index of the entry in the request.

import { h, replace, routeHref, id } from '../lib/dom.js';
import * as api from '../lib/api.js';
import { badge } from './status-badge.js';

/** The cluster's FSx for Lustre volumes, as `storage` lists them. */
export async function fsxVolumes(cluster) {
  const storages = await api.get(`/api/clusters/${api.seg(cluster)}/storage`);
  return (Array.isArray(storages) ? storages : []).filter((s) => s.kind === 'fsx_lustre');
}

/** "This cluster has no FSx for Lustre volume", with the way to the Storage tab. */
export function noVolumesNote(cluster) {
  return h('p', { class: 'muted volumes-empty' }, 'This cluster has no FSx for Lustre volume yet: ',
    h('a', { href: routeHref('clusters', cluster, 'storage') }, 'create one on the Storage tab'), '.');
}

function lifecycle(v) {
  const state = (v.file_system && v.file_system.lifecycle) || v.status || 'unknown';
  return badge(state, state === 'AVAILABLE' ? 'ok' : null);
}

function failedNote(err) {
  return h('p', { class: 'notice warn volumes-error' }, `The cluster's FSx volumes could not be read (${err.message || err.title || err}).`);
}

/**
 * The volumes a workload mounts: one row per volume of the cluster (tick it, optionally give a
 * mount path; `readOnlyChoice` adds a read-only tick). `read()` gives the request's list.
 */
export function volumeMounts(cluster, { field, legend, help, readOnlyChoice = false }) {
  const list = h('div', { class: 'volume-list', 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Reading the FSx volumes…'));
  const el = h('fieldset', { class: 'volumes', dataset: { field } }, h('legend', {}, legend),
    help ? h('p', { class: 'help' }, help) : null, list);
  let rows = [];

  /** Request paths follow the ticked rows: the k-th ticked volume is `<field>[k]`. */
  function renumber() {
    let k = 0;
    for (const r of rows) {
      const at = r.box.checked ? `${field}[${k}]` : null;
      for (const [node, suffix] of [[r.el, ''], [r.box, '.name'], [r.path, '.mount_path'], [r.ro, '.read_only']]) {
        if (!node) continue;
        if (at) node.dataset.field = at + suffix;
        else delete node.dataset.field;
      }
      r.path.disabled = !r.box.checked;
      if (r.ro) r.ro.disabled = !r.box.checked;
      if (at) k += 1;
    }
  }

  function row(v) {
    const boxId = id('vol');
    const pathId = id('vol-path');
    const box = h('input', { type: 'checkbox', id: boxId, value: v.name, dataset: { volume: v.name } });
    const path = h('input', {
      type: 'text', id: pathId, class: 'mono', placeholder: v.mount_path || `/fsx/${v.name}`, autocomplete: 'off', spellcheck: 'false',
      'aria-label': `Mount path of ${v.name}`, disabled: true,
    });
    const ro = readOnlyChoice ? h('input', { type: 'checkbox', id: id('vol-ro'), disabled: true, 'aria-label': `Mount ${v.name} read-only` }) : null;
    const rowEl = h('div', { class: 'field volume-row', dataset: { volume: v.name } },
      h('div', { class: 'volume-line' },
        h('div', { class: 'check' }, box, h('label', { for: boxId }, h('strong', { class: 'mono' }, v.name), ' ',
          h('span', { class: 'muted small-text' }, `claim ${v.claim || `fsx-${v.name}`}`), ' ', lifecycle(v))),
        h('label', { for: pathId, class: 'visually-hidden' }, `Mount path of ${v.name}`), path,
        ro ? h('span', { class: 'check' }, ro, h('label', { for: ro.id }, 'read-only')) : null));
    return { name: v.name, el: rowEl, box, path, ro };
  }

  list.addEventListener('change', renumber);
  return {
    el,
    render(volumes) {
      list.removeAttribute('aria-busy');
      if (!volumes.length) {
        rows = [];
        replace(list, noVolumesNote(cluster));
        return;
      }
      rows = volumes.map(row);
      replace(list, rows.map((r) => r.el));
      renumber();
    },
    failed(err) {
      list.removeAttribute('aria-busy');
      rows = [];
      replace(list, failedNote(err));
    },
    /** Ticks (or unticks) the volume `name`, if the cluster has it. */
    tick(name, on = true) {
      const r = rows.find((x) => x.name === name);
      if (r && r.box.checked !== on) {
        r.box.checked = on;
        renumber();
      }
    },
    /** The request's list: [{name, mount_path?, read_only?}] of the ticked volumes. */
    read() {
      if (el.closest('[hidden]')) return [];
      return rows.filter((r) => r.box.checked).map((r) => {
        const m = { name: r.name };
        if (r.path.value.trim()) m.mount_path = r.path.value.trim();
        if (r.ro && r.ro.checked) m.read_only = true;
        return m;
      });
    },
  };
}

/**
 * One volume or none: a select with data-field `field` whose first choice is `none` (the
 * shared bucket) and then each volume. Without volumes it shows `empty()` (by default the note
 * linking to the Storage tab; `null` shows nothing). A choice survives a re-render that keeps
 * its volume. `onChange(name)` hears the choice ('' for `none`).
 */
export function volumeChoice(cluster, { field, label, none, help, empty = () => noVolumesNote(cluster), onChange = () => {} }) {
  const slot = h('div', { class: 'volume-choice' });
  let select = null;
  let names = null;
  return {
    el: slot,
    render(volumes) {
      const key = volumes.map((v) => v.name).join(' ');
      if (names === key) return;
      names = key;
      const before = select ? select.value : '';
      select = null;
      slot.hidden = !volumes.length && !empty;
      if (!volumes.length) {
        replace(slot, empty ? empty() : null);
        if (before) onChange('');
        return;
      }
      const cid = id(`f-${field}`);
      const helpId = help ? id('help') : null;
      select = h('select', { id: cid, name: field, dataset: { field }, 'aria-describedby': helpId },
        h('option', { value: '' }, none),
        volumes.map((v) => h('option', { value: v.name, selected: v.name === before }, `FSx volume ${v.name} (${v.mount_path || `/fsx/${v.name}`})`)));
      select.addEventListener('change', () => onChange(select.value));
      replace(slot, h('div', { class: 'field' }, h('label', { for: cid }, label), select,
        help ? h('p', { class: 'help', id: helpId }, help) : null));
      if (before && select.value !== before) onChange('');
    },
    failed(err) {
      names = null;
      select = null;
      replace(slot, empty ? failedNote(err) : null);
    },
    /** The chosen volume's name, or undefined for `none`. */
    value() {
      return select && select.value && !slot.closest('[hidden]') ? select.value : undefined;
    },
  };
}

/** Reads the cluster's volumes once and renders every picker of a form with them. */
export function loadVolumesInto(cluster, ...pickers) {
  return fsxVolumes(cluster).then(
    (volumes) => { for (const p of pickers) p.render(volumes); return volumes; },
    (err) => { if (err.status !== 401) for (const p of pickers) p.failed(err); return []; },
  );
}

// Forms: fields that carry their request path, reading a form into a request body, and the
// validation findings shown next to the fields that caused them.
// Inputs carry data-field="<exact request path>" (e.g. hyperpod.instance_groups[1].count); a
// finding whose path has no input of its own is shown on the nearest ancestor path
// (hyperpod.instance_groups[0].capacity.arn → …capacity), else in the form's summary.
// A form whose request is nested in the server's record (a PATCH body recorded as `patch`, a
// POST body as `group`) passes `prefixes`: `patch.count` and `count` then both find
// data-field="patch.count" (decode errors name the body's own path, checks the recorded one).

import { h, replace, id } from './dom.js';

/** Parent path: a.b[2].c → a.b[2] → a.b → a → ''. */
export function parentPath(path) {
  const m = /^(.*?)(\.[^.[\]]+|\[\d+\])$/.exec(path);
  return m ? m[1] : '';
}

/** The paths a finding may be shown at: itself, then with a prefix added or removed. */
export function candidatePaths(path, prefixes = []) {
  const out = [path];
  for (const pre of prefixes) {
    const dotted = pre.endsWith('.') ? pre : `${pre}.`;
    if (path.startsWith(dotted)) out.push(path.slice(dotted.length));
    else out.push(dotted + path);
  }
  return out;
}

function findField(form, path, prefixes) {
  const at = (p) => form.querySelector(`[data-field="${CSS.escape(p)}"]`);
  const candidates = candidatePaths(path, prefixes);
  for (const c of candidates) {
    const el = at(c);
    if (el) return el;
  }
  for (const c of candidates) {
    for (let p = parentPath(c); p; p = parentPath(p)) {
      const el = at(p);
      if (el) return el;
    }
  }
  return null;
}

/** Removes every finding shown in `form`. */
export function clearFindings(form) {
  for (const el of form.querySelectorAll('.field-error')) el.remove();
  for (const el of form.querySelectorAll('[aria-invalid="true"]')) {
    el.removeAttribute('aria-invalid');
    const ids = (el.getAttribute('aria-describedby') || '').split(' ').filter((x) => x && !x.startsWith('err-'));
    if (ids.length) el.setAttribute('aria-describedby', ids.join(' '));
    else el.removeAttribute('aria-describedby');
  }
  for (const el of form.querySelectorAll('.has-error')) el.classList.remove('has-error');
  const summary = form.querySelector('.error-summary');
  if (summary) {
    summary.hidden = true;
    summary.replaceChildren();
  }
}

/**
 * Shows `error` (an ApiError) in `form`: each finding next to its field, and a summary at the
 * top that links to them. Focuses the summary so keyboard and screen-reader users land on it.
 * `compact` (small dialogs): the summary lists only findings no field took, and focus goes to
 * the first invalid control when every finding found its field.
 */
export function showFindings(form, error, { focus = true, prefixes = [], compact = false } = {}) {
  clearFindings(form);
  const summary = form.querySelector('.error-summary');
  const items = [];
  let firstPlaced = null;
  const findings = error.findings && error.findings.length
    ? error.findings
    : [{ field: '', rule: error.message }];
  for (const f of findings) {
    const el = f.field ? findField(form, f.field, prefixes) : null;
    const label = f.field ? [h('span', { class: 'mono' }, f.field), `: ${f.rule}`] : f.rule;
    if (el) {
      const msgId = id('err');
      const msg = h('p', { class: 'field-error', id: msgId, dataset: { errorFor: f.field } }, f.rule);
      const control = el.matches('input, select, textarea') ? el : el.querySelector('input, select, textarea');
      const anchor = el.closest('.field') || el;
      if (el.matches('fieldset')) {
        el.classList.add('has-error');
        const legend = el.querySelector(':scope > legend');
        if (legend) legend.after(msg);
        else el.prepend(msg);
      } else {
        anchor.classList.add('has-error');
        anchor.append(msg);
      }
      if (control) {
        control.setAttribute('aria-invalid', 'true');
        const ids = (control.getAttribute('aria-describedby') || '').split(' ').filter(Boolean);
        control.setAttribute('aria-describedby', [...ids, msgId].join(' '));
      }
      const target = control || el;
      firstPlaced = firstPlaced || target;
      if (compact) continue;
      items.push(h('li', {}, h('a', {
        href: '#',
        onclick: (e) => {
          e.preventDefault();
          openAncestors(target);
          target.focus();
        },
      }, label)));
    } else {
      items.push(h('li', {}, label));
    }
  }
  if (compact && !items.length) {
    if (focus && firstPlaced) {
      if (!firstPlaced.matches('input, select, textarea, button, a[href]')) firstPlaced.setAttribute('tabindex', '-1');
      firstPlaced.focus();
    }
    return;
  }
  if (summary) {
    replace(summary,
      h('h2', {}, error.status === 422 ? 'This request cannot be applied' : 'Fix these fields'),
      !error.findings.length && h('p', {}, error.title),
      h('ul', {}, items));
    summary.hidden = false;
    if (focus) summary.focus();
  }
}

/** Opens any <details> around `el` so it can be focused. */
export function openAncestors(el) {
  for (let p = el.parentElement; p; p = p.parentElement) {
    if (p.tagName === 'DETAILS') p.open = true;
  }
}

/** Prefixes under which a backend may record a workload request (`params.job.name`…). */
export const FINDING_PREFIXES = ['params', 'request', 'request.params'];

/**
 * A labelled control whose data-field is the request path `path`.
 * kind: text (default) | number | textarea | select | checkbox.
 */
export function formField(path, label, { kind = 'text', value = '', help, placeholder, options = [], attrs = {}, mono = false } = {}) {
  const cid = id(`f-${path.replace(/[^a-z0-9]+/gi, '-')}`);
  const helpId = help ? id('help') : null;
  const common = {
    id: cid, name: path, dataset: { field: path }, autocomplete: 'off', spellcheck: 'false',
    'aria-describedby': helpId, class: mono ? 'mono' : null, ...attrs,
  };
  let control;
  if (kind === 'textarea') {
    control = h('textarea', { rows: 3, placeholder, ...common });
    control.value = value ?? '';
  } else if (kind === 'select') {
    control = h('select', common, options.map((o) => (o instanceof Node ? o
      : h('option', { value: o[0], selected: String(o[0]) === String(value) }, o[1]))));
  } else if (kind === 'checkbox') {
    control = h('input', { type: 'checkbox', checked: !!value, ...common });
    return h('div', { class: 'field check' }, control, h('label', { for: cid }, label),
      help && h('p', { class: 'help', id: helpId }, help));
  } else {
    control = h('input', {
      type: 'text', value: value ?? '', placeholder,
      ...(kind === 'number' ? { inputmode: 'numeric' } : {}), ...common,
    });
  }
  return h('div', { class: 'field' }, h('label', { for: cid }, label), control,
    help && h('p', { class: 'help', id: helpId }, help));
}

/** Reads the controls of `form` by data-field: {path → string | boolean}. */
export function readForm(form) {
  const out = {};
  for (const el of form.querySelectorAll('[data-field]')) {
    if (!el.matches('input, select, textarea') || el.closest('[hidden]')) continue;
    out[el.dataset.field] = el.type === 'checkbox' ? el.checked : el.value.trim();
  }
  return out;
}

/** A whole number when the text is one, else the text (the backend names the field), else undefined. */
export function num(text) {
  const t = String(text ?? '').trim();
  if (t === '') return undefined;
  if (/^-?\d+(\.\d+)?$/.test(t)) return Number(t);
  return t;
}

/** Non-empty lines of a textarea. */
export function lines(text) {
  return String(text ?? '').split('\n').map((l) => l.trim()).filter(Boolean);
}

/** `key=value` lines as an object (a line without `=` keeps its text as key with value ''). */
export function pairs(text) {
  const out = {};
  for (const l of lines(text)) {
    const i = l.indexOf('=');
    if (i < 0) out[l] = '';
    else out[l.slice(0, i).trim()] = l.slice(i + 1).trim();
  }
  return out;
}

/** Drops undefined, '' and empty objects/arrays, recursively (the backend applies defaults). */
export function prune(v) {
  if (Array.isArray(v)) return v.length ? v : undefined;
  if (v && typeof v === 'object') {
    const out = {};
    for (const [k, x] of Object.entries(v)) {
      const p = prune(x);
      if (p !== undefined) out[k] = p;
    }
    return Object.keys(out).length ? out : undefined;
  }
  return v === '' || v === undefined || v === null ? undefined : v;
}

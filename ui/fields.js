// Validation findings next to the fields that caused them.
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

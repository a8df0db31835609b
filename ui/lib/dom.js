// Tiny DOM helpers. Everything rendered goes through text nodes or attributes: no innerHTML,
// so nothing the server (or a cluster name) contains can become markup.

const PROPS = new Set(['value', 'checked', 'disabled', 'selected', 'indeterminate', 'open', 'hidden', 'readOnly', 'multiple']);

/** Creates an element: h('button', {class: 'btn', onclick: fn}, 'Label', child, [more]). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'text') el.textContent = String(v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (PROPS.has(k)) el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

/** Appends children (nodes, strings, numbers, nested arrays; null/false skipped). */
export function append(el, ...children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** Replaces every child of `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, ...children);
}

let uid = 0;
/** A document-unique id with a readable prefix. */
export function id(prefix = 'id') {
  uid += 1;
  return `${prefix}-${uid}`;
}

/** Says `text` through the page's polite live region (screen readers). */
export function announce(text) {
  const region = document.getElementById('announcer');
  if (!region) return;
  region.textContent = '';
  // A new text node after a tick makes repeated messages be read again.
  setTimeout(() => { region.textContent = text; }, 30);
}

/** "1 h 02 min", "10 min", "3 min 05 s", "12 s", "0.4 s", "under 0.1 s". */
export function duration(ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '';
  if (ms < 0) ms = 0;
  if (ms < 100) return 'under 0.1 s';
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m} min ${String(s % 60).padStart(2, '0')} s` : `${m} min`;
  return m % 60 ? `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} min` : `${Math.floor(m / 60)} h`;
}

/** Local time of an ISO timestamp, with the date when it is not today. */
export function time(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  const today = new Date();
  const sameDay = d.toDateString() === today.toDateString();
  const t = d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  return sameDay ? t : `${d.toLocaleDateString()} ${t}`;
}

/** A <time> element for an ISO timestamp. */
export function timeEl(iso) {
  return iso ? h('time', { datetime: iso, title: iso }, time(iso)) : h('span', { class: 'muted' }, '—');
}

/** Speed factor of the simulated cloud (null on real AWS), set from the server's context. */
let simClock = null;

/** Tells `simTimeEl` whether times from the cloud are simulated, and how fast that clock runs. */
export function setSimClock(speed) {
  simClock = speed || null;
}

/** Why a time carries the "sim" marker. */
export function simTimeTitle(speed) {
  return `Simulated-cloud time: the simulated cloud's clock runs ${speed}× faster than the wall clock, `
    + 'so its times run ahead of the wall-clock times of operations';
}

/** A time read from the cloud (Kubernetes objects, events, MLflow): on the simulated cloud it
 *  is the simulated clock's, marked "sim" with a tooltip saying so; on AWS a plain `timeEl`. */
export function simTimeEl(iso) {
  if (!iso || !simClock) return timeEl(iso);
  const title = simTimeTitle(simClock);
  return h('span', { class: 'sim-time', title },
    h('time', { datetime: iso, title: `${iso} (${title})` }, time(iso)), ' ',
    h('abbr', { class: 'sim-marker', title, 'aria-label': 'simulated time' }, 'sim'));
}

/** Human words for snake_case values: "needs_attention" → "needs attention". */
export function words(s) {
  return String(s ?? '').replaceAll('_', ' ');
}

/** Route link. `parts` are encoded, so names cannot break out of the path. */
export function routeHref(...parts) {
  return '#/' + parts.map((p) => encodeURIComponent(p)).join('/');
}

/** Runs `fn` at most once per `ms`, trailing. */
export function debounce(fn, ms) {
  let t = null;
  const wrapped = (...args) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...args), ms);
  };
  wrapped.cancel = () => clearTimeout(t);
  return wrapped;
}

/** A visually hidden span (read by screen readers only). */
export function srOnly(text) {
  return h('span', { class: 'visually-hidden' }, text);
}

/**
 * Runs `render` (which rebuilds part of `container`) and gives focus back to the control that
 * had it, found again by its data-focus-key, so live refreshes do not lose the keyboard user.
 */
export function keepFocus(container, render) {
  const active = document.activeElement;
  const key = active && container.contains(active) ? active.dataset.focusKey : null;
  render();
  if (key) {
    const again = container.querySelector(`[data-focus-key="${CSS.escape(key)}"]`);
    if (again && again !== document.activeElement) again.focus({ preventScroll: true });
  }
}

/** A notice for a failed read (not found, forbidden, unreachable). */
export function errorNotice(err, what) {
  return h('div', { class: 'notice bad', role: 'alert' },
    h('strong', {}, err.status === 404 ? `No such ${what}. ` : `${err.title}. `), err.message);
}

// Training history: SageMaker managed MLflow. Pick a tracking server → its runs (newest first,
// latest loss and throughput) → the curves of a run as SVG line plots (loss and throughput over
// steps, each with its own axes), with the value under the pointer (or the arrow keys) shown.
// Colours come from the theme's CSS variables, so the plots follow light and dark. A table of
// the points sits under each plot for screen readers and copying. While a run is RUNNING the
// view refreshes every few seconds. The URL keeps the choice: #/history?server=…&run=…
// (?job=<name> picks that training job's newest run). A server can be deleted (typed-name
// confirmation, then the operation's progress in place); the server decides what goes.

import { h, replace, simTimeEl, announce, id as uid } from '../lib/dom.js';
import * as api from '../lib/api.js';
import { badge } from '../components/status-badge.js';
import { followOperation } from '../components/plan.js';
import { confirmedDelete } from '../components/workload-page.js';

const SVG = 'http://www.w3.org/2000/svg';
const REFRESH_MS = 4000;
const DELETE_DETAIL = 'SageMaker deletes the tracking server (it bills while it exists) with its runs and metrics, then the IAM role InstantStart created for it is removed. Artifacts already in S3 stay.';
const METRICS = [
  { key: 'loss', label: 'Loss', cls: 'series-loss' },
  { key: 'throughput', label: 'Throughput (tokens/s)', cls: 'series-throughput' },
];

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) el.setAttribute(k, String(v));
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

/** Round, readable tick values between lo and hi (about `n` of them). */
export function ticks(lo, hi, n = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((x) => x >= raw) || raw;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

function fmt(v) {
  if (!Number.isFinite(v)) return '';
  const a = Math.abs(v);
  if (a >= 10000) return v.toLocaleString(undefined, { maximumFractionDigits: 0 });
  if (a >= 100) return v.toFixed(1);
  if (a >= 1) return v.toFixed(3);
  return v.toPrecision(3);
}

/** A tick value as short as it can be: 2.6, 0.45, 8,000. */
function tickLabel(v) {
  return Number(v.toPrecision(6)).toLocaleString(undefined, { maximumFractionDigits: 4 });
}

/** An SVG line plot of `points` ({step, value}) with axes, labels and a hover/keyboard readout. */
function linePlot(metric, points) {
  const W = 640;
  const H = 260;
  const M = { l: 64, r: 16, t: 16, b: 40 };
  const iw = W - M.l - M.r;
  const ih = H - M.t - M.b;
  const steps = points.map((p) => p.step);
  const values = points.map((p) => p.value);
  const [x0, x1] = [Math.min(...steps), Math.max(...steps)];
  let [y0, y1] = [Math.min(...values), Math.max(...values)];
  const pad = (y1 - y0) * 0.08 || Math.abs(y0) * 0.05 || 1;
  y0 -= pad;
  y1 += pad;
  const x = (v) => M.l + (x1 > x0 ? ((v - x0) / (x1 - x0)) * iw : iw / 2);
  const y = (v) => M.t + ih - ((v - y0) / (y1 - y0)) * ih;
  const titleId = uid('plot-title');
  const descId = uid('plot-desc');
  const first = points[0];
  const last = points[points.length - 1];
  const svg = s('svg', {
    viewBox: `0 0 ${W} ${H}`, class: `plot ${metric.cls}`, role: 'img', tabindex: '0', 'aria-labelledby': `${titleId} ${descId}`,
    'data-metric': metric.key, 'data-points': points.length,
  },
  s('title', { id: titleId }, `${metric.label} over steps`),
  s('desc', { id: descId }, `${points.length} points from step ${first.step} (${fmt(first.value)}) to step ${last.step} (${fmt(last.value)}). Use the left and right arrow keys to read the values.`));
  // Grid and axes.
  const grid = s('g', { class: 'plot-grid' });
  for (const t of ticks(y0, y1)) {
    grid.append(s('line', { x1: M.l, x2: M.l + iw, y1: y(t), y2: y(t) }));
    grid.append(s('text', { x: M.l - 8, y: y(t), class: 'plot-tick', 'text-anchor': 'end', 'dominant-baseline': 'middle' }, tickLabel(t)));
  }
  for (const t of ticks(x0, x1, 6).filter((t) => Number.isInteger(t))) {
    grid.append(s('line', { x1: x(t), x2: x(t), y1: M.t, y2: M.t + ih, class: 'plot-vgrid' }));
    grid.append(s('text', { x: x(t), y: M.t + ih + 16, class: 'plot-tick', 'text-anchor': 'middle' }, String(t)));
  }
  svg.append(grid,
    s('line', { class: 'plot-axis', x1: M.l, x2: M.l + iw, y1: M.t + ih, y2: M.t + ih }),
    s('line', { class: 'plot-axis', x1: M.l, x2: M.l, y1: M.t, y2: M.t + ih }),
    s('text', { class: 'plot-label', x: M.l + iw / 2, y: H - 6, 'text-anchor': 'middle' }, 'Step'),
    s('text', { class: 'plot-label', x: 14, y: M.t + ih / 2, 'text-anchor': 'middle', transform: `rotate(-90 14 ${M.t + ih / 2})` }, metric.label));
  const d = points.map((p, i) => `${i ? 'L' : 'M'}${x(p.step).toFixed(1)},${y(p.value).toFixed(1)}`).join(' ');
  svg.append(s('path', { class: 'plot-line', d }));
  if (points.length === 1) svg.append(s('circle', { class: 'plot-dot', cx: x(first.step), cy: y(first.value), r: 3 }));
  // Readout: a guide line, a dot and a label that follow the pointer or the arrow keys.
  const guide = s('line', { class: 'plot-guide', y1: M.t, y2: M.t + ih, visibility: 'hidden' });
  const dot = s('circle', { class: 'plot-dot', r: 4, visibility: 'hidden' });
  const readoutText = s('text', { class: 'plot-readout-text', 'text-anchor': 'start' });
  const readoutBox = s('rect', { class: 'plot-readout-box', rx: 4, height: 20 });
  const readout = s('g', { class: 'plot-readout', visibility: 'hidden' }, readoutBox, readoutText);
  svg.append(guide, dot, readout);
  const live = h('p', { class: 'plot-value mono', 'aria-live': 'polite', dataset: { metric: metric.key } }, '');
  let index = -1;
  function show(i) {
    index = Math.max(0, Math.min(points.length - 1, i));
    const p = points[index];
    const px = x(p.step);
    const py = y(p.value);
    guide.setAttribute('x1', px);
    guide.setAttribute('x2', px);
    dot.setAttribute('cx', px);
    dot.setAttribute('cy', py);
    const text = `step ${p.step}: ${fmt(p.value)}`;
    readoutText.textContent = text;
    const tw = 8 + text.length * 7;
    const left = px + tw + 12 > M.l + iw ? px - tw - 8 : px + 8;
    readoutBox.setAttribute('x', left);
    readoutBox.setAttribute('y', M.t + 4);
    readoutBox.setAttribute('width', tw);
    readoutText.setAttribute('x', left + 4);
    readoutText.setAttribute('y', M.t + 18);
    for (const el of [guide, dot, readout]) el.setAttribute('visibility', 'visible');
    live.textContent = `${metric.label} at ${text}`;
    svg.dataset.hoverStep = String(p.step);
  }
  function hide() {
    for (const el of [guide, dot, readout]) el.setAttribute('visibility', 'hidden');
  }
  function nearest(clientX) {
    const box = svg.getBoundingClientRect();
    const vx = ((clientX - box.left) / box.width) * W;
    let best = 0;
    for (let i = 1; i < points.length; i += 1) if (Math.abs(x(points[i].step) - vx) < Math.abs(x(points[best].step) - vx)) best = i;
    return best;
  }
  svg.addEventListener('mousemove', (e) => show(nearest(e.clientX)));
  svg.addEventListener('mouseleave', hide);
  svg.addEventListener('blur', hide);
  svg.addEventListener('keydown', (e) => {
    const moves = { ArrowRight: 1, ArrowLeft: -1, Home: -Infinity, End: Infinity };
    if (!(e.key in moves)) return;
    e.preventDefault();
    const step = moves[e.key];
    show(Number.isFinite(step) ? (index < 0 ? (step > 0 ? 0 : points.length - 1) : index + step) : step > 0 ? points.length - 1 : 0);
  });
  const table = h('details', { class: 'plot-table' },
    h('summary', {}, `${metric.label}: the ${points.length} points`),
    h('div', { class: 'table-wrap' }, h('table', { class: 'table' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Step'), h('th', { scope: 'col' }, metric.label))),
      h('tbody', {}, points.map((p) => h('tr', {}, h('td', { class: 'counts' }, String(p.step)), h('td', { class: 'counts' }, fmt(p.value))))))));
  return h('figure', { class: 'plot-figure', dataset: { metric: metric.key } },
    h('figcaption', {}, h('strong', {}, metric.label), ' ',
      h('span', { class: 'muted' }, `${fmt(first.value)} → ${fmt(last.value)} over steps ${first.step}–${last.step}`)),
    svg, live, table);
}

function runStatus(status) {
  const tone = { RUNNING: 'busy', FINISHED: 'ok', FAILED: 'bad', KILLED: 'bad', SCHEDULED: 'muted' }[status] || 'muted';
  return badge(status.toLowerCase(), tone);
}

function problemText(err) {
  const findings = (err.problem && err.problem.findings) || [];
  return findings.length ? findings.map((f) => `${f.field}: ${f.rule}`).join('; ') : err.message;
}

export function historyView({ app, query }) {
  let server = query.get('server') || '';
  let run = query.get('run') || '';
  // ?job=<name> (from a job's page) picks that job's newest run.
  let job = query.get('job') || '';
  let disposed = false;
  let timer = null;
  // Set once a server was created from this screen: the form (with the link to its operation)
  // stays in view instead of vanishing when the new server shows up in the list.
  let created = false;
  const picker = h('select', { id: 'history-server', name: 'server', 'aria-describedby': 'history-server-help' });
  const serverHelp = h('p', { id: 'history-server-help', class: 'muted' }, 'SageMaker managed MLflow tracking servers of the default region.');
  const serverInfo = h('div', { id: 'history-server-info' });
  const runsSlot = h('div', { id: 'history-runs', 'aria-live': 'polite' });
  const plotSlot = h('div', { id: 'history-plots' });
  const errorBox = h('div', { role: 'alert' });
  const activity = h('div', { id: 'history-activity' });
  const createForm = createServerForm();

  function setUrl() {
    const q = new URLSearchParams();
    if (server) q.set('server', server);
    if (run) q.set('run', run);
    const hash = `#/history${q.toString() ? `?${q}` : ''}`;
    if (location.hash !== hash) history.replaceState(null, '', hash);
  }

  function schedule() {
    clearTimeout(timer);
    if (!disposed) timer = setTimeout(refresh, REFRESH_MS);
  }

  async function loadServers() {
    try {
      const servers = await api.list('/api/mlflow/servers');
      if (disposed) return;
      replace(errorBox);
      replace(picker, h('option', { value: '' }, servers.length ? 'Choose a tracking server…' : 'No tracking servers yet'),
        servers.map((sv) => h('option', { value: sv.name, selected: sv.name === server }, `${sv.name} — ${sv.status}`)));
      if (!server && servers.length === 1) server = servers[0].name;
      picker.value = server;
      const chosen = servers.find((sv) => sv.name === server);
      renderServer(chosen);
      createForm.hidden = servers.length > 0 && !created;
      if (chosen) await loadRuns(chosen);
      if (servers.some((sv) => sv.status === 'Creating' || sv.status === 'Deleting')) schedule();
    } catch (err) {
      if (err.status === 401) return;
      replace(errorBox, h('p', { class: 'notice bad' }, `Could not read the tracking servers: ${problemText(err)}`));
    }
  }

  function renderServer(sv) {
    if (!sv) {
      replace(serverInfo);
      replace(runsSlot);
      replace(plotSlot);
      return;
    }
    replace(serverInfo, h('dl', { class: 'props' },
      h('dt', {}, 'Status'), h('dd', {}, badge(sv.status, sv.status === 'Created' ? 'ok' : /Failed/.test(sv.status) ? 'bad' : 'busy')),
      h('dt', {}, 'ARN'), h('dd', { class: 'mono', id: 'history-server-arn' }, sv.arn),
      h('dt', {}, 'Artifacts'), h('dd', { class: 'mono' }, sv.artifact_store_uri || '—'),
      h('dt', {}, 'MLflow UI'), h('dd', {}, sv.url ? h('a', { href: sv.url, target: '_blank', rel: 'noopener noreferrer' }, sv.url) : '—'),
      h('dt', {}, 'Created'), h('dd', {}, simTimeEl(sv.created_at))),
    h('div', { class: 'actions' }, h('button', {
      type: 'button', class: 'btn small danger-outline', id: 'history-delete-server', 'aria-label': `Delete tracking server ${sv.name}…`,
      disabled: sv.status === 'Deleting', onclick: () => deleteServer(sv.name),
    }, 'Delete…')));
    if (sv.status !== 'Created') {
      replace(runsSlot, h('p', { class: 'muted' }, `The server is ${sv.status}; its runs can be read once it is Created (about 20 minutes on AWS).`));
      replace(plotSlot);
    }
  }

  async function loadRuns(sv) {
    if (sv.status !== 'Created') return;
    try {
      const runs = await api.get(`/api/mlflow/servers/${api.seg(sv.name)}/runs`);
      if (disposed) return;
      if (!runs.length) {
        replace(runsSlot, h('p', { class: 'muted', id: 'history-no-runs' },
          'No runs yet. Submit a training job with this server’s ARN (MLflow tracking in the job form) and its loss and throughput appear here.'));
        replace(plotSlot);
        schedule();
        return;
      }
      const ofJob = job && runs.find((r) => r.name === job);
      if (ofJob) run = ofJob.run_id;
      job = '';
      if (!run || !runs.some((r) => r.run_id === run)) run = runs[0].run_id;
      setUrl();
      renderRuns(runs);
      const current = runs.find((r) => r.run_id === run);
      await loadMetrics(sv, current);
      if (runs.some((r) => r.status === 'RUNNING' || r.status === 'SCHEDULED')) schedule();
    } catch (err) {
      if (err.status === 401) return;
      replace(runsSlot, h('p', { class: 'notice bad' }, `Could not read the runs: ${problemText(err)}`));
    }
  }

  function renderRuns(runs) {
    const metric = (r, k) => (r.metrics && k in r.metrics ? fmt(r.metrics[k]) : '—');
    replace(runsSlot, h('div', { class: 'table-wrap' }, h('table', { class: 'table', id: 'history-runs-table' },
      h('caption', { class: 'visually-hidden' }, `Runs of ${server}, newest first`),
      h('thead', {}, h('tr', {}, ['Run', 'Experiment', 'Status', 'Started', 'Loss', 'Throughput'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, runs.map((r) => h('tr', { dataset: { run: r.run_id }, class: r.run_id === run ? 'selected' : null, 'aria-selected': r.run_id === run ? 'true' : 'false' },
        h('th', { scope: 'row' }, h('button', {
          type: 'button', class: 'linklike', 'aria-pressed': r.run_id === run ? 'true' : 'false',
          onclick: () => { run = r.run_id; setUrl(); refresh(); },
        }, r.name), h('div', { class: 'muted mono small' }, r.run_id)),
        h('td', {}, r.experiment),
        h('td', {}, runStatus(r.status)),
        h('td', {}, simTimeEl(r.start_time)),
        h('td', { class: 'counts' }, metric(r, 'loss')),
        h('td', { class: 'counts' }, metric(r, 'throughput'))))))));
  }

  async function loadMetrics(sv, r) {
    try {
      const m = await api.get(`/api/mlflow/servers/${api.seg(sv.name)}/runs/${api.seg(r.run_id)}/metrics`, { query: { keys: METRICS.map((x) => x.key).join(',') } });
      if (disposed) return;
      const figures = METRICS.map((metric) => {
        const points = (m.series[metric.key] || []).filter((p) => Number.isFinite(p.value));
        return points.length ? linePlot(metric, points)
          : h('p', { class: 'muted', dataset: { metric: metric.key } }, `${metric.label}: not logged by this run yet.`);
      });
      const focused = document.activeElement && plotSlot.contains(document.activeElement) ? document.activeElement.dataset.metric : null;
      replace(plotSlot, h('h2', { id: 'history-plot-heading' }, `${r.name} `, runStatus(r.status)), h('div', { class: 'plots' }, figures));
      if (focused) plotSlot.querySelector(`svg[data-metric="${focused}"]`)?.focus();
    } catch (err) {
      if (err.status === 401) return;
      replace(plotSlot, h('p', { class: 'notice bad' }, `Could not read the metrics: ${problemText(err)}`));
    }
  }

  async function refresh() {
    clearTimeout(timer);
    await loadServers();
  }

  async function deleteServer(name) {
    const op = await confirmedDelete({ what: 'tracking server', name, detail: DELETE_DETAIL, path: `/api/mlflow/servers/${api.seg(name)}`, activity });
    if (!op) return;
    followOperation(activity, op, {
      title: `Delete tracking server ${name}`,
      speed: app.simSpeed(),
      onSettled: (done) => {
        if (done.status === 'succeeded') {
          if (server === name) {
            server = '';
            run = '';
            setUrl();
          }
          announce(`Tracking server ${name} deleted`);
        }
        refresh();
      },
    });
    refresh();
  }

  picker.addEventListener('change', () => {
    server = picker.value;
    run = '';
    setUrl();
    announce(server ? `Tracking server ${server}` : 'No tracking server chosen');
    refresh();
  });

  function createServerForm() {
    const name = h('input', { id: 'history-new-name', name: 'name', required: true, value: 'training-history', autocomplete: 'off' });
    const cluster = h('input', { id: 'history-new-cluster', name: 'cluster', value: (app.context && app.context.active_cluster) || '', autocomplete: 'off' });
    const msg = h('p', { class: 'form-message', role: 'status' });
    const form = h('form', { id: 'history-create', class: 'card', hidden: true },
      h('h2', {}, 'Create a tracking server'),
      h('p', { class: 'muted' }, 'An IAM role for the artifact bucket, then a SageMaker managed MLflow tracking server (about 20 minutes on AWS). Its artifacts go to the cluster’s shared bucket under mlflow/<name>.'),
      h('div', { class: 'field' }, h('label', { for: name.id }, 'Name'), name),
      h('div', { class: 'field' }, h('label', { for: cluster.id }, 'Cluster'), cluster),
      h('button', { type: 'submit', class: 'btn primary' }, 'Create'), msg);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      replace(msg, 'Creating…');
      try {
        const body = { name: name.value.trim(), ...(cluster.value.trim() ? { cluster: cluster.value.trim() } : {}) };
        const res = await api.post('/api/mlflow/servers', body, { idempotencyKey: api.newIdempotencyKey() });
        const op = res.data.operation;
        server = body.name;
        created = true;
        replace(msg, 'Started: ', h('a', { href: `#/operations/${api.seg(op.id)}` }, 'follow the operation'), '.');
        refresh();
      } catch (err) {
        replace(msg, h('span', { class: 'bad-text' }, problemText(err)));
      }
    });
    return form;
  }

  const el = h('section', { class: 'history-view' },
    h('div', { class: 'page-head' }, h('h1', {}, 'Training history')),
    errorBox,
    h('div', { class: 'field' }, h('label', { for: picker.id }, 'Tracking server'), picker, serverHelp),
    serverInfo,
    activity,
    createForm,
    h('h2', {}, 'Runs'),
    runsSlot,
    plotSlot);
  loadServers();
  return {
    el,
    title: 'Training history',
    dispose() {
      disposed = true;
      clearTimeout(timer);
    },
  };
}

// GPU and training metrics over time as SVG line plots: the picture of
// GET /api/clusters/{cluster}/metrics for one node (a line per GPU) or one training job (the
// mean over its GPUs, its throughput and its loss). One plot per metric, each with a time axis
// (HH:MM:SS of the simulated or real clock), a labelled value axis, a legend naming each line
// and the latest value in its caption; a table of the points sits under each plot for screen
// readers. `metricsPanel` reads the series and redraws while it is open (every few seconds,
// not while the tab is hidden); the caller starts and stops it. No chart library: plain SVG in
// the theme's colours, so the plots follow light and dark.

import { h, replace, id as uid } from '../lib/dom.js';
import * as api from '../lib/api.js';

const SVG = 'http://www.w3.org/2000/svg';
const REFRESH_MS = 5000;
/** The metrics in the order they are plotted, with their axis label. */
export const METRICS = [
  { key: 'gpu_utilization', label: 'GPU utilization (%)' },
  { key: 'gpu_memory_used', label: 'GPU memory used (GiB)' },
  { key: 'throughput', label: 'Throughput (tokens/s)' },
  { key: 'loss', label: 'Loss' },
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

/** A value as the plot shows it: memory in GiB, percent whole, the rest short. */
export function shown(metric, v) {
  if (!Number.isFinite(v)) return '';
  if (metric === 'gpu_memory_used') return (v / 1024).toFixed(1);
  if (metric === 'gpu_utilization') return v.toFixed(0);
  if (metric === 'loss') return v.toFixed(4);
  return v >= 100 ? v.toFixed(0) : v.toFixed(2);
}

/** HH:MM:SS (UTC) of Unix seconds. */
function clock(t) {
  return new Date(t * 1000).toISOString().slice(11, 19);
}

/** The name of one line: "GPU 3", or "job mean". */
function lineName(series) {
  return series.gpu === undefined || series.gpu === null ? (series.metric.startsWith('gpu_') ? 'mean of the job’s GPUs' : 'job') : `GPU ${series.gpu}`;
}

/**
 * A plot of the series of one metric: a line each, over [start, end] (Unix seconds), the
 * value axis from 0 (or the lowest value, for loss) to the highest (100 for utilization, one
 * GPU's memory for memory when known).
 */
export function metricPlot(metric, series, { start, end, memoryTotal } = {}) {
  const W = 640;
  const H = 240;
  const M = { l: 64, r: 16, t: 16, b: 40 };
  const iw = W - M.l - M.r;
  const ih = H - M.t - M.b;
  const key = metric.key;
  // A series may have no point yet (a job that has not logged a loss): the axes then span a
  // default range instead of ±Infinity, which would draw NaN coordinates.
  const values = series.flatMap((x) => x.points.map((p) => p[1])).filter(Number.isFinite);
  const times = series.flatMap((x) => x.points.map((p) => p[0])).filter(Number.isFinite);
  const now = Date.now() / 1000;
  const x0 = start ?? (times.length ? Math.min(...times) : now - 600);
  const x1 = end ?? (times.length ? Math.max(...times) : now);
  let y0 = key === 'loss' && values.length ? Math.min(...values) : 0;
  let y1 = Math.max(...values, 0);
  if (key === 'gpu_utilization') y1 = 100;
  if (key === 'gpu_memory_used' && memoryTotal) y1 = memoryTotal;
  if (key === 'loss' || key === 'throughput') {
    const pad = (y1 - y0) * 0.08 || Math.abs(y1) * 0.05 || 1;
    y0 = key === 'loss' ? y0 - pad : y0;
    y1 += pad;
  }
  if (!(y1 > y0)) y1 = y0 + 1;
  const x = (v) => M.l + (x1 > x0 ? ((v - x0) / (x1 - x0)) * iw : iw / 2);
  const y = (v) => M.t + ih - ((v - y0) / (y1 - y0)) * ih;
  const titleId = uid('metric-title');
  const descId = uid('metric-desc');
  const points = series.reduce((n, x) => n + x.points.length, 0);
  const latest = series.filter((x) => x.points.length).map((x) => [lineName(x), x.points[x.points.length - 1][1]]);
  const summary = latest.map(([n, v]) => `${n}: ${shown(key, v)}`).join(', ');
  const svg = s('svg', {
    viewBox: `0 0 ${W} ${H}`, class: `plot metric-plot metric-${key}`, role: 'img', 'aria-labelledby': `${titleId} ${descId}`,
    'data-metric': key, 'data-points': points, 'data-lines': series.length,
  },
  s('title', { id: titleId }, `${metric.label} from ${clock(x0)} to ${clock(x1)}`),
  s('desc', { id: descId }, `${series.length} line${series.length === 1 ? '' : 's'}, ${points} points. Latest: ${summary || 'none'}.`));
  const grid = s('g', { class: 'plot-grid' });
  // Memory is served in MiB and shown in GiB: its ticks are round numbers of GiB.
  const scale = key === 'gpu_memory_used' ? 1024 : 1;
  for (const t of ticks(y0 / scale, y1 / scale).map((v) => v * scale)) {
    const label = Number((t / scale).toPrecision(6)).toLocaleString(undefined, { maximumFractionDigits: 4 });
    grid.append(s('line', { x1: M.l, x2: M.l + iw, y1: y(t), y2: y(t) }));
    grid.append(s('text', { x: M.l - 8, y: y(t), class: 'plot-tick', 'text-anchor': 'end', 'dominant-baseline': 'middle' }, label));
  }
  const span = Math.max(x1 - x0, 1);
  const every = [15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400].find((e) => span / e <= 5) || 21600;
  for (let t = Math.ceil(x0 / every) * every; t <= x1; t += every) {
    grid.append(s('line', { x1: x(t), x2: x(t), y1: M.t, y2: M.t + ih, class: 'plot-vgrid' }));
    grid.append(s('text', { x: x(t), y: M.t + ih + 16, class: 'plot-tick plot-time', 'text-anchor': 'middle' }, clock(t)));
  }
  svg.append(grid,
    s('line', { class: 'plot-axis', x1: M.l, x2: M.l + iw, y1: M.t + ih, y2: M.t + ih }),
    s('line', { class: 'plot-axis', x1: M.l, x2: M.l, y1: M.t, y2: M.t + ih }),
    s('text', { class: 'plot-label plot-x-label', x: M.l + iw / 2, y: H - 6, 'text-anchor': 'middle' }, 'Time (UTC)'),
    s('text', { class: 'plot-label plot-y-label', x: 14, y: M.t + ih / 2, 'text-anchor': 'middle', transform: `rotate(-90 14 ${M.t + ih / 2})` }, metric.label));
  series.forEach((line, i) => {
    if (!line.points.length) return;
    const d = line.points.map((p, j) => `${j ? 'L' : 'M'}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' ');
    svg.append(s('path', { class: `plot-line line-${i % 8}`, d, 'data-line': lineName(line), 'data-points': line.points.length }));
    if (line.points.length === 1) {
      const [t, v] = line.points[0];
      svg.append(s('circle', { class: `plot-dot line-${i % 8}`, cx: x(t), cy: y(v), r: 3 }));
    }
  });
  const legend = series.length > 1
    ? h('ul', { class: 'plot-legend' }, series.map((line, i) => h('li', { class: `line-${i % 8}` },
      h('span', { class: 'swatch', 'aria-hidden': 'true' }), `${lineName(line)} `,
      h('span', { class: 'muted' }, line.points.length ? shown(key, line.points[line.points.length - 1][1]) : '—'))))
    : null;
  const table = h('details', { class: 'plot-table' },
    h('summary', {}, `${metric.label}: the ${points} points`),
    h('div', { class: 'table-wrap' }, h('table', { class: 'table' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Time (UTC)'), series.map((line) => h('th', { scope: 'col' }, lineName(line))))),
      h('tbody', {}, (series[0]?.points || []).map((p, j) => h('tr', { dataset: { t: String(p[0]) } },
        h('td', { class: 'counts' }, clock(p[0])),
        series.map((line) => h('td', { class: 'counts' }, line.points[j] ? shown(key, line.points[j][1]) : '—'))))))));
  const caption = latest.length === 1
    ? h('span', { class: 'plot-latest', dataset: { metric: key, value: String(latest[0][1]) } }, `latest ${shown(key, latest[0][1])}`)
    : h('span', { class: 'plot-latest', dataset: { metric: key } }, latest.length ? `${latest.length} lines` : 'no points yet');
  return h('figure', { class: 'plot-figure metric-figure', dataset: { metric: key } },
    h('figcaption', {}, h('strong', {}, metric.label), ' ', h('span', { class: 'muted' }, caption)),
    svg, legend, table);
}

/**
 * A panel reading GET /api/clusters/{cluster}/metrics for `{ node }` or `{ job, namespace }`
 * and drawing one plot per metric the answer has. `start()` reads now and every few seconds
 * while the page is visible; `stop()` ends it.
 */
export function metricsPanel(cluster, subject, { since = 900 } = {}) {
  const status = h('p', { class: 'muted metrics-status', role: 'status' }, 'Reading the metrics…');
  const plots = h('div', { class: 'plots metric-plots' });
  const el = h('div', { class: 'metrics-panel', dataset: subject.node ? { node: subject.node } : { job: subject.job } }, status, plots);
  let timer = null;
  let running = false;

  async function read() {
    clearTimeout(timer);
    if (!running) return;
    try {
      const v = await api.get(`/api/clusters/${api.seg(cluster)}/metrics`, { query: { ...subject, since } });
      if (!running) return;
      const start = Date.parse(v.start) / 1000;
      const end = Date.parse(v.end) / 1000;
      const drawn = METRICS.map((m) => [m, v.series.filter((x) => x.metric === m.key)]).filter(([, xs]) => xs.length);
      replace(status, `${v.origin === 'simulated' ? 'Simulated telemetry' : v.origin} · the last ${Math.round(since / 60)} minutes, a point every ${v.step_seconds} s`,
        v.gpu_memory_total_mib ? ` · ${(v.gpu_memory_total_mib / 1024).toFixed(0)} GiB per GPU` : '');
      replace(plots, drawn.length
        ? drawn.map(([m, xs]) => metricPlot(m, xs, { start, end, memoryTotal: v.gpu_memory_total_mib }))
        : h('p', { class: 'muted' }, subject.node ? 'This node has no NVIDIA GPU.' : 'No pods of this job have run yet.'));
    } catch (err) {
      if (err.status === 401 || !running) return;
      replace(status, h('span', { class: 'notice warn' }, h('strong', {}, 'Metrics unavailable. '), err.message));
    }
    if (running && !document.hidden) timer = setTimeout(read, REFRESH_MS);
  }

  function onVisible() {
    if (running && !document.hidden) read();
  }

  return {
    el,
    start() {
      if (running) return;
      running = true;
      document.addEventListener('visibilitychange', onVisible);
      read();
    },
    stop() {
      running = false;
      clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisible);
    },
  };
}

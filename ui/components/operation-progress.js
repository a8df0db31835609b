// <is-operation-progress operation-id="op-…" sim-speed="300" [embedded]> — the live progress panel.
// `embedded`: shown inside the page of its target (cluster page), so the success banner links
// to the operation's own page instead of back to the cluster.
// Every step with its phase, elapsed time, ETA, detail and error; Retry on a stopped step,
// Cancel for the operation. Updates arrive over the WebSocket (no polling); the connection
// is re-established with backoff when the server restarts.

import { h, replace, duration, timeEl, words, announce, routeHref } from '../lib/dom.js';
import { get, post, seg, OperationStream } from '../lib/api.js';
import { estimate, operationElapsed, ACTIVE_PHASES, RETRYABLE_PHASES } from '../lib/progress.js';
import { badge } from './status-badge.js';
import { openDialog } from './dialog.js';

export const KIND_TITLES = {
  create_cluster: 'Create cluster',
  delete_cluster: 'Delete cluster',
  import_cluster: 'Import cluster',
  add_instance_group: 'Add instance group',
  update_instance_group: 'Update instance group',
  delete_instance_group: 'Delete instance group',
  reboot_nodes: 'Reboot nodes',
  replace_nodes: 'Replace nodes',
  delete_nodes: 'Delete nodes',
  set_features: 'Change managed features',
  submit_job: 'Submit training job',
  delete_job: 'Delete training job',
  download_model: 'Download model',
  delete_download: 'Delete model download',
  deploy_endpoint: 'Deploy endpoint',
  update_endpoint: 'Update endpoint',
  delete_endpoint: 'Delete endpoint',
  assign_pool_worker: 'Move pool worker',
  create_tracking_server: 'Create MLflow tracking server',
  delete_tracking_server: 'Delete MLflow tracking server',
  start_health_check: 'Deep health checks',
  add_hyperpod: 'Add HyperPod',
  remove_hyperpod: 'Remove HyperPod',
  update_software: 'Update instance group software',
};

const CLUSTER_KINDS = new Set(['create_cluster', 'delete_cluster', 'import_cluster']);

/** "Create cluster demo", "Change managed features — demo". */
export function operationTitle(op) {
  const cluster = clusterOf(op.target);
  const kind = KIND_TITLES[op.kind] || words(op.kind);
  if (!cluster) return `${kind} — ${op.target}`;
  // Workload targets: cluster/<name>/<kind>/<workload> → "Deploy endpoint qwen3 — demo".
  const wl = workloadOf(op.target);
  if (wl) return `${kind} ${wl.name} — ${cluster}`;
  return CLUSTER_KINDS.has(op.kind) ? `${kind} ${cluster}` : `${kind} — ${cluster}`;
}

const GLYPH = {
  pending: '○', submitting: '◔', submitted: '◑', polling: '◕', succeeded: '✓', failed: '✕',
  needs_attention: '!', cancelled: '–',
};

export function clusterOf(target) {
  return target && target.startsWith('cluster/') ? target.slice('cluster/'.length).split('/')[0] : null;
}

const WORKLOAD_SECTIONS = { job: 'jobs', endpoint: 'endpoints', download: 'storage', pool: 'endpoints' };

/** The workload of a target cluster/<c>/<kind>/<name>: {kind, name, href} (null for cluster targets). */
export function workloadOf(target) {
  const m = /^cluster\/([^/]+)\/([^/]+)\/(.+)$/.exec(target || '');
  if (!m) return null;
  const section = WORKLOAD_SECTIONS[m[2]];
  const href = !section ? null
    : section === 'storage' || m[2] === 'pool' ? routeHref('clusters', m[1], section) : routeHref('clusters', m[1], section, m[3]);
  // A pool worker: cluster/<c>/pool/<pool>/worker/<pod> names the pod.
  return { kind: m[2] === 'pool' ? 'worker' : m[2], name: m[2] === 'pool' ? m[3].split('/').pop() : m[3], href };
}

class OperationProgress extends HTMLElement {
  connectedCallback() {
    if (this.started) return;
    this.started = true;
    this.opId = this.getAttribute('operation-id');
    const speed = Number(this.getAttribute('sim-speed'));
    this.simulated = Number.isFinite(speed) && speed > 0;
    this.speed = this.simulated ? speed : 1;
    this.rows = new Map();
    this.op = null;
    this.build();
    this.load();
    this.stream = new OperationStream({
      operationId: this.opId,
      onOperation: (op) => { if (op.id === this.opId) this.update(op); },
      onState: (state, extra) => this.setConnection(state, extra),
    }).start();
    this.timer = setInterval(() => this.tick(), 500);
  }

  disconnectedCallback() {
    this.stream?.stop();
    clearInterval(this.timer);
    this.started = false;
  }

  build() {
    this.classList.add('op-panel');
    this.statusSlot = h('span', { class: 'op-status' });
    this.conn = h('span', { class: 'conn', dataset: { state: 'connecting' }, role: 'status' }, 'Connecting…');
    this.meta = h('p', { class: 'op-meta muted' });
    this.bar = h('progress', { class: 'op-bar', max: 1, value: 0, 'aria-label': 'Steps completed' });
    this.counts = h('span', { class: 'op-counts' });
    this.elapsed = h('span', { class: 'op-elapsed' });
    this.eta = h('span', { class: 'op-eta' });
    this.banner = h('div', { class: 'op-banner', hidden: true });
    this.cancelBtn = h('button', { type: 'button', class: 'btn danger-outline', hidden: true, onclick: () => this.cancel() }, 'Cancel operation');
    this.list = h('ol', { class: 'steps', 'aria-label': 'Steps' });
    this.errorBox = h('div', { class: 'notice bad', role: 'alert', hidden: true });
    replace(this,
      h('div', { class: 'op-head' },
        h('div', { class: 'op-head-main' }, this.statusSlot, this.conn),
        h('div', { class: 'op-actions' }, this.cancelBtn)),
      this.meta,
      h('div', { class: 'op-summary' }, this.bar,
        h('p', { class: 'op-numbers' }, this.counts, this.elapsed, this.eta)),
      this.errorBox,
      this.banner,
      this.list);
  }

  async load() {
    try {
      const op = await get(`/api/operations/${seg(this.opId)}`);
      this.update(op);
    } catch (err) {
      if (err.status === 401) return;
      this.errorBox.hidden = false;
      replace(this.errorBox, h('strong', {}, err.status === 404 ? 'No such operation. ' : `${err.title}. `), err.message);
    }
  }

  setConnection(state, extra) {
    this.conn.dataset.state = state;
    const text = {
      connecting: 'Connecting…',
      live: 'Live',
      reconnecting: extra && extra.attempt > 1 ? `Reconnecting (attempt ${extra.attempt})…` : 'Reconnecting…',
      stopped: 'Not following',
    }[state] || state;
    this.conn.textContent = text;
    this.conn.title = state === 'live' ? 'Updates arrive over a WebSocket as they happen' : 'Connection to the control plane lost; retrying with backoff';
  }

  update(op) {
    const prev = this.op;
    // The first GET and the stream's snapshot race: an answer older than what is shown (a fast
    // operation finished in between) must not turn a finished operation back into a running one.
    const at = (o) => Date.parse(o && o.updated_at);
    if (prev && prev.id === op.id
      && (at(op) < at(prev) || (at(op) === at(prev) && prev.status !== 'running' && op.status === 'running'))) return;
    this.op = op;
    this.errorBox.hidden = true;
    this.dataset.status = op.status;
    replace(this.statusSlot, badge(op.status));
    const actor = op.actor ? `${op.actor.face}/${op.actor.principal}` : '';
    replace(this.meta,
      h('span', { class: 'mono' }, op.id), ' · started ', timeEl(op.created_at), actor && ` by ${actor}`,
      this.simulated ? ` · simulated cloud at ${this.speed}× speed` : '');
    // Steps, keyed: existing rows are updated in place so focus and reading position stay.
    const seen = new Set();
    for (const step of op.steps) {
      seen.add(step.key);
      let row = this.rows.get(step.key);
      if (!row) {
        row = this.makeRow(step);
        this.rows.set(step.key, row);
        this.list.append(row.el);
      }
      const before = prev?.steps.find((s) => s.key === step.key);
      this.fillRow(row, step, op);
      if (before && before.phase !== step.phase && step.phase !== 'pending') {
        if (['succeeded', 'failed', 'needs_attention'].includes(step.phase)) {
          announce(`${step.title}: ${words(step.phase)}`);
        }
      }
    }
    for (const [key, row] of this.rows) {
      if (!seen.has(key)) {
        row.el.remove();
        this.rows.delete(key);
      }
    }
    this.cancelBtn.hidden = op.status !== 'running';
    this.renderBanner(op);
    if (prev && prev.status !== op.status) {
      announce(`Operation ${words(op.status)}${op.error ? ': ' + op.error : ''}`);
    }
    this.tick();
    this.dispatchEvent(new CustomEvent('operation', { detail: op, bubbles: true }));
  }

  makeRow(step) {
    const r = {};
    r.icon = h('span', { class: 'step-icon', 'aria-hidden': 'true' });
    r.title = h('span', { class: 'step-title' });
    r.badge = h('span', { class: 'step-badge' });
    r.meta = h('p', { class: 'step-meta muted' });
    r.timing = h('p', { class: 'step-timing' });
    r.bar = h('progress', { class: 'step-bar', max: 1, value: 0, hidden: true, 'aria-hidden': 'true' });
    r.detail = h('p', { class: 'step-detail', hidden: true });
    r.error = h('p', { class: 'step-error', hidden: true });
    r.retry = h('button', { type: 'button', class: 'btn small', hidden: true, onclick: () => this.retry(step.key, r) }, 'Retry step');
    r.retryNote = h('span', { class: 'muted small-text', hidden: true });
    r.retryError = h('span', { class: 'inline-error', role: 'alert', hidden: true });
    r.el = h('li', { class: 'step', dataset: { stepKey: step.key } },
      r.icon,
      h('div', { class: 'step-main' },
        h('div', { class: 'step-line' }, r.title, r.badge),
        r.meta, r.timing, r.bar, r.detail, r.error,
        h('div', { class: 'step-actions' }, r.retry, r.retryNote, r.retryError)));
    return r;
  }

  fillRow(r, step, op) {
    r.step = step;
    r.el.dataset.phase = step.phase;
    r.icon.textContent = GLYPH[step.phase] || '•';
    r.title.textContent = step.title;
    if (r.badgePhase !== step.phase) {
      replace(r.badge, badge(step.phase));
      r.badgePhase = step.phase;
    }
    const meta = [h('span', { class: 'mono' }, step.key)];
    if (step.depends_on.length) meta.push(` · after ${step.depends_on.join(', ')}`);
    if (step.attempts > 1) meta.push(` · attempt ${step.attempts}`);
    if (step.resource) meta.push(' · ', h('span', { class: 'mono' }, `${step.resource.kind} ${step.resource.id}`));
    replace(r.meta, meta);
    r.detail.hidden = !step.detail;
    r.detail.textContent = step.detail || '';
    r.error.hidden = !step.error;
    replace(r.error, step.error ? [h('strong', {}, 'Error: '), step.error] : []);
    // Failed and needs-attention steps offer Retry; cancelled ones resume from the banner.
    const stopped = RETRYABLE_PHASES.has(step.phase) && step.phase !== 'cancelled';
    const hadFocus = r.retry === document.activeElement;
    r.retry.hidden = !stopped;
    r.retry.disabled = !stopped || op.status === 'running';
    r.retryNote.hidden = !(stopped && op.status === 'running');
    r.retryNote.textContent = 'Retry is available when the other running steps have finished.';
    if (!stopped) r.retryError.hidden = true;
    if (hadFocus && r.retry.hidden) {
      r.title.setAttribute('tabindex', '-1');
      r.title.focus();
    }
  }

  tick() {
    const op = this.op;
    if (!op) return;
    const now = Date.now();
    const est = estimate(op, this.speed, now);
    this.bar.max = Math.max(1, est.total);
    this.bar.value = est.done;
    this.counts.textContent = `${est.done} of ${est.total} steps done`;
    const el = operationElapsed(op, now);
    this.elapsed.textContent = el !== null ? ` · elapsed ${duration(el)}` : '';
    this.eta.textContent = est.remaining !== null && op.status === 'running'
      ? ` · about ${duration(est.remaining)} remaining` : '';
    for (const step of op.steps) {
      const row = this.rows.get(step.key);
      const s = est.steps.get(step.key);
      if (!row || !s) continue;
      const parts = [];
      if (s.elapsed !== null) parts.push(`${ACTIVE_PHASES.has(step.phase) ? 'running for' : 'took'} ${duration(s.elapsed)}`);
      if (ACTIVE_PHASES.has(step.phase) && s.expected !== null) {
        parts.push(s.overdue ? 'taking longer than expected' : `about ${duration(s.remaining)} left`);
      } else if (step.phase === 'pending' && s.expected !== null) {
        parts.push(`expected ${duration(s.expected)}`);
      }
      if (s.expected !== null && this.simulated && step.expected_secs >= 60) {
        parts.push(`(${duration(step.expected_secs * 1000)} on real AWS)`);
      }
      row.timing.textContent = parts.join(' · ');
      const showBar = ACTIVE_PHASES.has(step.phase) && s.expected;
      row.bar.hidden = !showBar;
      if (showBar) {
        row.bar.max = s.expected;
        row.bar.value = Math.min(s.expected, s.elapsed || 0);
      }
    }
  }

  renderBanner(op) {
    const b = this.banner;
    const cluster = clusterOf(op.target);
    b.className = 'op-banner';
    if (op.status === 'running') {
      b.hidden = true;
      return;
    }
    b.hidden = false;
    if (op.status === 'succeeded') {
      b.classList.add('ok');
      let link;
      const wl = workloadOf(op.target);
      if (this.hasAttribute('embedded')) link = h('a', { href: routeHref('operations', op.id), class: 'btn small' }, 'Operation details');
      else if (wl && wl.href && !/^delete_/.test(op.kind)) link = h('a', { href: wl.href, class: 'btn primary' }, `Open ${wl.kind} ${wl.name}`);
      else if (cluster && op.kind !== 'delete_cluster') link = h('a', { href: routeHref('clusters', cluster), class: 'btn primary' }, `Open cluster ${cluster}`);
      else link = h('a', { href: '#/clusters', class: 'btn' }, 'Back to clusters');
      const text = {
        create_cluster: `Cluster ${cluster} is ready.`,
        import_cluster: `Cluster ${cluster} was imported.`,
        delete_cluster: `Cluster ${cluster} was deleted.`,
      }[op.kind] || `${operationTitle(op)}: every step succeeded.`;
      replace(b, h('p', {}, h('strong', {}, 'Done. '), text), link);
    } else if (op.status === 'cancelled') {
      b.classList.add('muted');
      const first = op.steps.find((s) => s.phase === 'cancelled');
      const resume = first && h('button', { type: 'button', class: 'btn', id: 'resume-operation' }, 'Resume operation');
      resume?.addEventListener('click', () => this.retry(first.key, this.rows.get(first.key), resume));
      replace(b, h('p', {}, h('strong', {}, 'Cancelled. '),
        'Steps stopped between provider calls; nothing was rolled back. Resuming continues the cancelled steps; finished ones are not repeated.'),
      resume);
    } else {
      b.classList.add(op.status === 'needs_attention' ? 'warn' : 'bad');
      const stopped = op.steps.filter((s) => s.phase === 'failed' || s.phase === 'needs_attention');
      replace(b,
        h('p', {}, h('strong', {}, op.status === 'needs_attention' ? 'Needs attention. ' : 'Failed. '), op.error || ''),
        h('p', { class: 'muted' }, 'Fix the cause, then retry the stopped step. Completed steps are not repeated; a retry looks for the resource before it submits again.'),
        stopped.length > 0 && h('div', { class: 'actions' }, stopped.map((s) => h('button', {
          type: 'button', class: 'btn small', onclick: () => this.showStep(s.key),
        }, `Go to: ${s.title}`))));
    }
  }

  /** Scrolls to a step and focuses its Retry button (or its title). */
  showStep(key) {
    const row = this.rows.get(key);
    if (!row) return;
    row.el.scrollIntoView({ block: 'center' });
    if (!row.retry.hidden && !row.retry.disabled) {
      row.retry.focus();
    } else {
      row.title.setAttribute('tabindex', '-1');
      row.title.focus();
    }
  }

  async retry(key, row, button = row.retry) {
    button.disabled = true;
    row.retryError.hidden = true;
    try {
      const { data } = await post(`/api/operations/${seg(this.opId)}/steps/${seg(key)}/retry`);
      announce(`Retrying ${row.step?.title || key}`);
      if (data && data.id) this.update(data);
      row.el.querySelector('.step-title')?.setAttribute('tabindex', '-1');
      row.el.querySelector('.step-title')?.focus();
    } catch (err) {
      row.retryError.hidden = false;
      row.retryError.textContent = err.message;
      button.disabled = false;
      if (button !== row.retry) this.showStep(key);
    }
  }

  async cancel() {
    const op = this.op;
    await openDialog({
      title: 'Cancel this operation?',
      body: [h('p', {}, 'Running steps stop between provider calls. Nothing is rolled back: resources already created stay, and you can retry a cancelled step later.')],
      confirmLabel: 'Cancel operation',
      cancelLabel: 'Keep running',
      danger: true,
      onConfirm: async () => {
        const { data } = await post(`/api/operations/${seg(op.id)}/cancel`);
        if (data && data.id) this.update(data);
        return data;
      },
    });
  }
}

if (!customElements.get('is-operation-progress')) customElements.define('is-operation-progress', OperationProgress);

// <is-features-panel cluster="demo" sim-speed="300"> — the Advanced features panel.
// Reads GET /api/clusters/{name}/features, lets the user flip switches, shows the diff and sends
// ONLY the changed fields with PATCH. While the managed-features backend is absent (404), the
// panel is shown disabled and no state is invented.

import { h, replace, id, announce, routeHref } from '../dom.js';
import { get, patch, seg, newIdempotencyKey } from '../api.js';
import { FEATURES, DEFAULT_MEMORY_PERCENT, normalizeFeatures, featuresPatch, describePatch, describeServerChanges } from '../features.js';
import { showFindings, clearFindings } from '../fields.js';

let dryRunSupport = null;

/** Whether PATCH /api/clusters/{name}/features documents a dry_run query parameter. */
async function supportsDryRun() {
  if (dryRunSupport === null) {
    dryRunSupport = get('/api/openapi.json').then((doc) => {
      const op = doc?.paths?.['/api/clusters/{name}/features']?.patch;
      return !!op && (op.parameters || []).some((p) => p && p.name === 'dry_run' && p.in === 'query');
    }).catch(() => false);
  }
  return dryRunSupport;
}

export const UNAVAILABLE_TEXT = 'Arrives with the managed-features backend';

class FeaturesPanel extends HTMLElement {
  connectedCallback() {
    if (this.started) return;
    this.started = true;
    this.cluster = this.getAttribute('cluster');
    this.speed = this.getAttribute('sim-speed');
    this.classList.add('features-panel');
    this.headingId = id('features');
    this.load();
  }

  disconnectedCallback() {
    this.started = false;
  }

  path() {
    return `/api/clusters/${seg(this.cluster)}/features`;
  }

  heading() {
    return h('h2', { id: this.headingId }, 'Advanced features');
  }

  async load() {
    replace(this, this.heading(), h('p', { class: 'muted' }, 'Reading the cluster’s managed features…'));
    this.setAttribute('aria-busy', 'true');
    try {
      const raw = await get(this.path());
      this.actual = normalizeFeatures(raw);
      this.dataset.state = 'available';
      this.renderForm();
    } catch (err) {
      if (err.status === 404 || err.status === 405 || err.status === 501) {
        this.dataset.state = 'unavailable';
        this.renderUnavailable();
      } else if (err.status !== 401) {
        this.dataset.state = 'error';
        replace(this, this.heading(),
          h('div', { class: 'notice bad', role: 'alert' }, h('strong', {}, `${err.title}. `), err.message),
          h('button', { type: 'button', class: 'btn', onclick: () => this.load() }, 'Try again'));
      }
    } finally {
      this.removeAttribute('aria-busy');
    }
  }

  renderUnavailable() {
    const rows = FEATURES.map((f) => {
      const inputId = id('feat');
      const input = h('input', { type: 'checkbox', role: 'switch', id: inputId, disabled: true, indeterminate: true, 'aria-describedby': `${inputId}-help` });
      return h('div', { class: 'feature' },
        h('div', { class: 'feature-switch' }, input, h('label', { for: inputId }, f.label)),
        h('p', { class: 'help', id: `${inputId}-help` }, f.help, ' ', h('span', { class: 'muted' }, 'State unknown.')));
    });
    replace(this,
      this.heading(),
      h('p', { class: 'notice muted unavailable', role: 'note' }, h('strong', {}, UNAVAILABLE_TEXT), ' — this control plane does not serve managed features yet, so their state is not shown.'),
      h('fieldset', { disabled: true, class: 'features-fieldset', 'aria-describedby': this.headingId },
        h('legend', { class: 'visually-hidden' }, 'Managed features (unavailable)'),
        rows,
        h('div', { class: 'actions' }, h('button', { type: 'button', class: 'btn', disabled: true }, 'Review changes'))));
  }

  renderForm() {
    const a = this.actual;
    this.controls = {};
    const rows = FEATURES.map((f) => {
      const inputId = id('feat');
      const on = f.key === 'tiered_checkpointing' ? !!a.tiered_checkpointing : !!a[f.key];
      const input = h('input', {
        type: 'checkbox', role: 'switch', id: inputId, checked: on, name: f.key,
        dataset: { field: f.key }, 'aria-describedby': `${inputId}-help`, onchange: () => this.changed(),
      });
      this.controls[f.key] = input;
      const extra = [];
      if (f.key === 'tiered_checkpointing') {
        const memId = id('mem');
        this.memory = h('input', {
          type: 'number', id: memId, min: 1, max: 100, step: 1, inputmode: 'numeric',
          value: String(a.tiered_checkpointing?.memory_percent ?? DEFAULT_MEMORY_PERCENT),
          dataset: { field: 'tiered_checkpointing.memory_percent' }, oninput: () => this.changed(),
        });
        extra.push(h('div', { class: 'field inline' }, h('label', { for: memId }, 'Memory for the checkpoint tier (%)'), this.memory));
      }
      return h('div', { class: 'feature', dataset: { feature: f.key } },
        h('div', { class: 'feature-switch field' }, input, h('label', { for: inputId }, f.label),
          h('span', { class: 'state-text muted' }, on ? 'on' : 'off')),
        h('p', { class: 'help', id: `${inputId}-help` }, f.help),
        extra);
    });
    this.reviewBtn = h('button', { type: 'button', class: 'btn', disabled: true, onclick: () => this.review() }, 'Review changes');
    this.count = h('span', { class: 'muted', role: 'status' }, 'No changes');
    this.diffBox = h('div', { class: 'diff-box', hidden: true, tabindex: '-1' });
    this.form = h('form', { novalidate: true, onsubmit: (e) => e.preventDefault() },
      h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' }),
      rows,
      h('div', { class: 'actions' }, this.reviewBtn, this.count),
      this.diffBox);
    this.progressSlot = h('div', { class: 'features-progress' });
    replace(this, this.heading(),
      h('p', { class: 'muted' }, 'Only the switches you change are sent; the control plane compares them with the cluster’s real state and does nothing when it already matches.'),
      this.form, this.progressSlot);
    this.changed();
  }

  desired() {
    const d = {};
    for (const f of FEATURES) {
      if (f.key === 'tiered_checkpointing') {
        const raw = this.memory.value.trim();
        const n = Number(raw);
        d.tiered_checkpointing = this.controls[f.key].checked
          ? { memory_percent: raw !== '' && Number.isInteger(n) ? n : raw } : null;
      } else {
        d[f.key] = this.controls[f.key].checked;
      }
    }
    return d;
  }

  changed() {
    this.memory.disabled = !this.controls.tiered_checkpointing.checked;
    for (const f of FEATURES) {
      const row = this.querySelector(`[data-feature="${f.key}"] .state-text`);
      if (row) row.textContent = this.controls[f.key].checked ? 'on' : 'off';
    }
    this.patch = featuresPatch(this.actual, this.desired());
    const n = Object.keys(this.patch).length;
    this.reviewBtn.disabled = n === 0;
    this.count.textContent = n === 0 ? 'No changes' : `${n} change${n === 1 ? '' : 's'} not applied yet`;
    this.diffBox.hidden = true;
    this.key = null;
  }

  diffList(lines) {
    return h('ul', { class: 'diff' }, lines.map((l) => h('li', { dataset: { field: l.field } },
      h('span', { class: 'diff-field' }, l.label), ' ',
      h('del', {}, l.from), h('span', { 'aria-hidden': 'true' }, ' → '), h('span', { class: 'visually-hidden' }, ' becomes '),
      h('ins', {}, l.to))));
  }

  async review() {
    clearFindings(this.form);
    const body = { ...this.patch };
    this.key = newIdempotencyKey();
    const lines = describePatch(this.actual, body);
    const apply = h('button', { type: 'button', class: 'btn primary', onclick: () => this.apply(body, apply) }, 'Apply changes');
    const serverSlot = h('div', {});
    replace(this.diffBox,
      h('h3', {}, 'Changes to apply'),
      this.diffList(lines),
      h('details', { class: 'json' }, h('summary', {}, 'Request body (PATCH)'), h('pre', {}, JSON.stringify(body, null, 2))),
      serverSlot,
      h('div', { class: 'actions' }, apply));
    this.diffBox.hidden = false;
    this.diffBox.focus();
    // The backend's own plan, when its OpenAPI document says PATCH takes ?dry_run (a server
    // that ignored the parameter would apply the change on "review").
    if (!(await supportsDryRun())) return;
    try {
      const { data } = await patch(this.path(), body, { query: { dry_run: true } });
      const server = describeServerChanges(data && (data.plan || data));
      const steps = data && Array.isArray(data.steps) ? data.steps : [];
      replace(serverSlot,
        server && [h('h4', {}, 'Diff against the cluster’s real state'),
          server.length ? this.diffList(server) : h('p', {}, 'Already in this state: nothing would change.')],
        steps.length > 0 && [h('h4', {}, 'Steps the control plane will run'),
          h('ol', { class: 'plan-steps compact' }, steps.map((st) => h('li', { dataset: { stepKey: st.key } }, st.title)))]);
    } catch (err) {
      if (err.findings.length) showFindings(this.form, err);
    }
  }

  async apply(body, btn) {
    btn.disabled = true;
    btn.setAttribute('aria-busy', 'true');
    try {
      const { status, data } = await patch(this.path(), body, { idempotencyKey: this.key });
      if (status === 202 && data && data.operation) {
        announce('Feature change started');
        const progress = h('is-operation-progress', { 'operation-id': data.operation.id, ...(this.speed ? { 'sim-speed': this.speed } : {}) });
        let done = false;
        progress.addEventListener('operation', async (e) => {
          if (done || e.detail.status !== 'succeeded') return;
          done = true;
          const opId = e.detail.id;
          await this.load();
          this.progressSlot?.replaceChildren(h('p', { class: 'notice muted', role: 'status' },
            'Applied. ', h('a', { href: routeHref('operations', opId) }, 'See the operation')));
        });
        replace(this.progressSlot, h('h3', {}, 'Applying'), progress);
        this.diffBox.hidden = true;
      } else {
        announce(data && data.no_change ? 'Already in this state: nothing was done' : 'Features updated');
        await this.load();
        if (data && data.no_change) {
          this.progressSlot.replaceChildren(h('p', { class: 'notice muted', role: 'status' }, data.message || 'Already in this state: nothing was done.'));
        }
      }
    } catch (err) {
      showFindings(this.form, err);
      btn.disabled = false;
    } finally {
      btn.removeAttribute('aria-busy');
    }
  }
}

if (!customElements.get('is-features-panel')) customElements.define('is-features-panel', FeaturesPanel);

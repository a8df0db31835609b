// <is-features-panel cluster="demo" sim-speed="300"> — the Advanced features panel.
// Reads GET /api/clusters/{cluster}/features (the real state), lets the user flip switches, and
// sends ONLY the changed fields with PATCH: first as a dry run, whose diff against the real
// state (and steps) the control plane computes and the panel shows; "already in this state"
// when nothing would change; then the change itself, followed on the embedded progress panel.

import { h, replace, id, announce } from '../lib/dom.js';
import { get, patch, seg, newIdempotencyKey } from '../lib/api.js';
import { FEATURES, NODE_RECOVERY, DEFAULT_MEMORY_PERCENT, normalizeFeatures, featuresPatch, describePatch, describeServerChanges, parseGroups } from '../lib/features.js';
import { showFindings, clearFindings } from '../lib/forms.js';
import { diffList, stepList, planTiming, refusal, followOperation } from './plan.js';

export const UNAVAILABLE_TEXT = 'Managed features are not available for this cluster';

const ELASTIC_NOTE = 'Elastic training jobs cannot run while managed tiered checkpointing is on (nor on Spot groups).';

class FeaturesPanel extends HTMLElement {
  connectedCallback() {
    if (this.started) return;
    this.started = true;
    this.cluster = this.getAttribute('cluster');
    this.speed = Number(this.getAttribute('sim-speed')) || null;
    this.classList.add('features-panel');
    this.headingId = id('features');
    this.formSlot = h('div', { class: 'features-form' }, h('p', { class: 'muted' }, 'Reading the cluster’s managed features…'));
    this.progressSlot = h('div', { class: 'features-progress activity-slot' });
    replace(this,
      h('h2', { id: this.headingId }, 'Advanced features'),
      h('p', { class: 'muted' }, 'Only the switches you change are sent; the control plane compares them with the cluster’s real state and does nothing when it already matches.'),
      this.formSlot, this.progressSlot);
    this.setAttribute('role', 'region');
    this.setAttribute('aria-labelledby', this.headingId);
    this.load();
  }

  disconnectedCallback() {
    this.started = false;
  }

  path() {
    return `/api/clusters/${seg(this.cluster)}/features`;
  }

  async load() {
    this.setAttribute('aria-busy', 'true');
    this.loading = true;
    this.loadStartedAt = Date.now();
    try {
      const raw = await get(this.path());
      this.actual = normalizeFeatures(raw);
      this.scope = raw && typeof raw.autoscaling_scope === 'string' ? raw.autoscaling_scope : null;
      this.dataset.state = 'available';
      this.renderForm();
    } catch (err) {
      if (err.status === 401) return;
      this.dataset.state = err.status === 422 || err.status === 404 ? 'unavailable' : 'error';
      replace(this.formSlot,
        h('div', { class: `notice ${err.status === 422 || err.status === 404 ? 'muted unavailable' : 'bad'}`, role: 'status' },
          h('strong', {}, err.status === 422 || err.status === 404 ? `${UNAVAILABLE_TEXT}. ` : `${err.title}. `), err.message),
        h('div', { class: 'actions' }, h('button', { type: 'button', class: 'btn', onclick: () => this.load() }, 'Try again')));
    } finally {
      this.loading = false;
      this.removeAttribute('aria-busy');
    }
  }

  /** Re-reads the state after a change made elsewhere, unless the user is in the middle of one. */
  refreshIfIdle(op) {
    if (this.dataset.state !== 'available' || this.loading) return;
    if (op && Date.parse(op.updated_at) <= this.loadStartedAt) return;
    const running = this.progressSlot.querySelector('is-operation-progress:not([data-status]), is-operation-progress[data-status="running"]');
    if (running || (this.patch && Object.keys(this.patch).length) || (this.diffBox && !this.diffBox.hidden)) return;
    this.load();
  }

  renderForm() {
    const a = this.actual;
    this.controls = {};
    this.notes = {};
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
          'aria-describedby': `${memId}-help`,
        });
        extra.push(h('div', { class: 'field inline mem-field' },
          h('label', { for: memId }, 'Instance memory for the checkpoint tier (%)'), this.memory,
          h('span', { class: 'help', id: `${memId}-help` }, '1–100; applies to every node.')));
        this.notes.elastic = h('p', { class: 'help note elastic-note', role: 'note' }, ELASTIC_NOTE);
        extra.push(this.notes.elastic);
      }
      if (f.key === 'managed_autoscaling') {
        extra.push(h('p', { class: 'help scope-note', dataset: { scope: '' } },
          h('strong', {}, 'Scope: '), this.scope || 'HyperPod instance groups only (scale from zero); not general EC2 capacity.'));
        const groupsId = id('asg');
        this.groups = h('input', {
          type: 'text', id: groupsId, name: 'autoscaling_instance_groups', autocomplete: 'off', spellcheck: false,
          value: (a.autoscaling_instance_groups || []).join(', '), placeholder: 'every instance group',
          dataset: { field: 'autoscaling_instance_groups' }, oninput: () => this.changed(),
          'aria-describedby': `${groupsId}-help`,
        });
        extra.push(h('div', { class: 'field inline groups-field' },
          h('label', { for: groupsId }, 'Instance groups Karpenter may scale'), this.groups,
          h('span', { class: 'help', id: `${groupsId}-help` }, 'Comma-separated, at most 10; empty: every group (and groups added later). Karpenter takes idle groups to zero.')));
      }
      return h('div', { class: 'feature', dataset: { feature: f.key } },
        h('div', { class: 'feature-switch field' }, input, h('label', { for: inputId }, f.label),
          h('span', { class: 'state-text muted' }, on ? 'on' : 'off')),
        h('p', { class: 'help', id: `${inputId}-help` }, f.help),
        extra);
    });
    const recoveryId = id('recovery');
    this.recovery = h('select', {
      id: recoveryId, name: NODE_RECOVERY.key, dataset: { field: NODE_RECOVERY.key },
      'aria-describedby': `${recoveryId}-help`, onchange: () => this.changed(),
    }, NODE_RECOVERY.values.map((v) => h('option', { value: v, selected: v === a.node_recovery }, v)));
    rows.push(h('div', { class: 'feature', dataset: { feature: NODE_RECOVERY.key } },
      h('div', { class: 'field inline' }, h('label', { for: recoveryId }, NODE_RECOVERY.label), this.recovery),
      h('p', { class: 'help', id: `${recoveryId}-help` }, NODE_RECOVERY.help)));
    this.reviewBtn = h('button', { type: 'button', class: 'btn', disabled: true, onclick: () => this.review() }, 'Review changes');
    this.count = h('span', { class: 'muted', role: 'status' }, 'No changes');
    this.diffBox = h('div', { class: 'diff-box', hidden: true, tabindex: '-1' });
    this.form = h('form', { novalidate: true, onsubmit: (e) => e.preventDefault() },
      h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' }),
      rows,
      h('div', { class: 'actions' }, this.reviewBtn, this.count),
      this.diffBox);
    replace(this.formSlot, this.form);
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
    d.autoscaling_instance_groups = parseGroups(this.groups.value);
    d.node_recovery = this.recovery.value;
    return d;
  }

  changed() {
    const tieredOn = this.controls.tiered_checkpointing.checked;
    this.memory.disabled = !tieredOn;
    this.notes.elastic.hidden = !tieredOn;
    this.groups.disabled = !this.controls.managed_autoscaling.checked;
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

  async review() {
    clearFindings(this.form);
    const body = { ...this.patch };
    this.key = newIdempotencyKey();
    const serverSlot = h('div', { class: 'server-plan', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Asking the control plane for its diff against the real state…'));
    replace(this.diffBox,
      h('h3', {}, 'Review'),
      h('h4', {}, 'You changed'),
      diffList(describePatch(this.actual, body)),
      h('details', { class: 'json' }, h('summary', {}, 'Request body (PATCH)'), h('pre', {}, JSON.stringify(body, null, 2))),
      serverSlot);
    this.diffBox.hidden = false;
    this.diffBox.focus();
    try {
      const { data } = await patch(this.path(), body, { query: { dry_run: true } });
      const lines = describeServerChanges(data && data.plan) || [];
      const steps = data && Array.isArray(data.steps) ? data.steps : [];
      if (!lines.length) {
        replace(serverSlot, h('div', { class: 'notice muted no-change', role: 'status' },
          h('p', {}, h('strong', {}, 'Already in this state. '), 'The cluster already matches: nothing would change, and applying creates no operation.'),
          h('button', { type: 'button', class: 'btn small', onclick: () => this.load() }, 'Show the cluster’s state')));
        return;
      }
      const apply = h('button', { type: 'button', class: 'btn primary', id: 'features-apply' }, 'Apply changes');
      apply.addEventListener('click', () => this.apply(body, apply));
      replace(serverSlot,
        h('h4', {}, 'Diff against the cluster’s real state'),
        diffList(lines),
        steps.length > 0 && [h('h4', {}, 'Steps the control plane will run'), stepList(steps),
          h('p', { class: 'muted small-text' }, planTiming(steps, this.speed), '.')],
        h('div', { class: 'actions' }, apply));
    } catch (err) {
      if (err.status === 401) return;
      replace(serverSlot);
      if (err.findings.length) showFindings(this.form, err, { prefixes: ['patch'] });
      else serverSlot.append(refusal(err));
    }
  }

  async apply(body, btn) {
    btn.disabled = true;
    btn.setAttribute('aria-busy', 'true');
    try {
      const { status, data } = await patch(this.path(), body, { idempotencyKey: this.key });
      if (status === 202 && data && data.operation) {
        this.diffBox.hidden = true;
        followOperation(this.progressSlot, data.operation, {
          title: 'Applying feature changes',
          speed: this.speed,
          onSettled: async (op) => {
            await this.load();
            if (op.status === 'succeeded') {
              announce('Feature change applied');
              this.progressSlot.querySelector('.activity')?.append(
                h('p', { class: 'notice ok applied', role: 'status' }, h('strong', {}, 'Applied. '), 'The switches above show the cluster’s state now.'));
            }
          },
        });
      } else {
        announce('Already in this state: nothing was done');
        await this.load();
        replace(this.progressSlot, h('p', { class: 'notice muted no-change', role: 'status' },
          h('strong', {}, 'Already in this state. '), (data && data.message) || 'Nothing was done.'));
      }
    } catch (err) {
      if (err.status === 401) return;
      btn.disabled = false;
      if (err.findings.length) showFindings(this.form, err, { prefixes: ['patch'] });
      else this.diffBox.append(refusal(err));
    } finally {
      btn.removeAttribute('aria-busy');
    }
  }
}

if (!customElements.get('is-features-panel')) customElements.define('is-features-panel', FeaturesPanel);

// Instance groups of a cluster's HyperPod cluster (cluster page): the live table (current and
// target counts, capacity, interfaces, zone), "Add instance group" (decision-level questions,
// then the server's plan with its preflight checks), "Scale" (sends only {count}; the server's
// diff first, "already in this state" when nothing changes) and "Delete" (typed confirmation).
// Capacity type, interface mode, instance type and zone are fixed for a group's lifetime: shown
// read-only; a change asked anyway gets the control plane's refusal next to the field.
// "Update software" (UpdateClusterSoftware) shows each group's software (the release it runs,
// the one it moves to during an update, the image status), the server's plan, and asks for a
// confirmation: updated nodes get a new root volume. Accepted changes are followed on the
// embedded progress panel.

import { h, replace, id, announce, keepFocus, words } from '../../lib/dom.js';
import * as api from '../../lib/api.js';
import { badge } from '../../components/status-badge.js';
import { openDialog } from '../../components/dialog.js';
import { showFindings, clearFindings } from '../../lib/forms.js';
import { typeLabel, typeInfo } from '../../lib/instance-types.js';
import { diffList, planLines, planTiming, stepList, checkList, failedChecks, refusal, followOperation, regionContext, whole, CAPACITY_LABELS, INTERFACE_LABELS } from '../../components/plan.js';

const FIXED = [
  ['instance_type', 'Instance type'],
  ['capacity', 'Capacity type'],
  ['interface_mode', 'Network interfaces'],
  ['availability_zone', 'Availability Zone'],
];
const LABELS = { count: 'Node count', ...Object.fromEntries(FIXED) };

function capacityText(c) {
  if (!c) return '—';
  return CAPACITY_LABELS[c.type] || words(c.type);
}

/** Options of the instance-type select: accelerated first, then CPU; `keep` stays selected. */
function typeOptions(select, types, az, keep) {
  const offered = types.filter((t) => !az || t.availability_zones.includes(az));
  const accel = offered.filter((t) => t.info && t.info.accelerators > 0);
  const cpu = offered.filter((t) => !(t.info && t.info.accelerators > 0));
  const smallest = [...accel].sort((a, b) => (a.info.accelerators - b.info.accelerators) || (a.info.memory_gib - b.info.memory_gib))[0];
  const choice = offered.some((t) => t.instance_type === keep) ? keep : (smallest || offered[0])?.instance_type;
  const opt = (t) => h('option', { value: t.instance_type, selected: t.instance_type === choice }, typeLabel(t));
  replace(select, offered.length
    ? [accel.length && h('optgroup', { label: 'Accelerated' }, accel.map(opt)), cpu.length && h('optgroup', { label: 'CPU' }, cpu.map(opt))]
    : h('option', { value: '' }, az ? `No HyperPod instance types offered in ${az}` : 'Choose an Availability Zone'));
}

/** A group's software: release (or AMI), "current → desired" while an update runs, its status. */
export function softwareText(s) {
  if (!s) return '—';
  const now = s.current_release || s.current_image_id || '—';
  const next = s.desired_release || s.desired_image_id;
  const moving = next && next !== now ? `${now} → ${next}` : now;
  const running = ['Pending', 'InProgress', 'RollbackInProgress'].includes(s.update_status);
  const failed = ['Failed', 'RollbackComplete'].includes(s.update_status);
  const status = running || failed ? s.update_status : s.image_version_status;
  return status ? `${moving} (${words(status)})` : moving;
}

function field(labelText, control, help) {
  const helpId = help ? id('help') : null;
  if (helpId) control.setAttribute('aria-describedby', helpId);
  return h('div', { class: 'field' }, h('label', { for: control.id }, labelText), control,
    help && h('p', { class: 'help', id: helpId }, help));
}

export function groupsSection({ name, speed, reload }) {
  const st = { cluster: null, groups: [], nodes: [], knownAz: new Map(), region: null };
  const addBtn = h('button', { type: 'button', class: 'btn', id: 'add-group', onclick: () => openAdd() }, '+ Add instance group');
  const softwareBtn = h('button', { type: 'button', class: 'btn', id: 'update-software', onclick: () => updateSoftware() }, 'Update software…');
  const tableSlot = h('div', { class: 'groups-slot' }, h('p', { class: 'muted' }, 'Reading the instance groups…'));
  const activity = h('div', { class: 'activity-slot', id: 'groups-activity' });
  const el = h('section', { class: 'card', 'aria-labelledby': 'groups-title', id: 'groups-card' },
    h('div', { class: 'section-head' }, h('h2', { id: 'groups-title' }, 'Instance groups'), h('div', { class: 'actions' }, softwareBtn, addBtn)),
    tableSlot, activity);

  /** The zone of a group: where its nodes run, else what its request said (nothing guessed). */
  function azOf(g) {
    const node = st.nodes.find((n) => n.instance_group === g.name);
    if (node) st.knownAz.set(g.name, node.availability_zone);
    return st.knownAz.get(g.name) || null;
  }

  function update(cluster, ops = []) {
    st.cluster = cluster;
    st.region = cluster.region;
    const hp = cluster.hyperpod;
    st.groups = hp ? hp.instance_groups : [];
    st.nodes = cluster.nodes || [];
    for (const g of cluster.request?.hyperpod?.instance_groups || []) {
      if (!st.knownAz.has(g.name)) st.knownAz.set(g.name, g.availability_zone);
    }
    for (const op of [...ops].reverse()) {
      const g = op.kind === 'add_instance_group' && op.request?.group;
      if (g && g.name && g.availability_zone) st.knownAz.set(g.name, g.availability_zone);
    }
    addBtn.hidden = !hp;
    softwareBtn.hidden = !hp || !st.groups.length;
    keepFocus(tableSlot, renderTable);
  }

  let shownSig = null;

  function renderTable() {
    const hp = st.cluster.hyperpod;
    // Rebuilt only when something shown changed: refreshes keep focus and elements otherwise.
    const sig = JSON.stringify([st.groups, st.groups.map((g) => azOf(g)), !!hp]);
    if (sig === shownSig) return;
    shownSig = sig;
    if (!st.groups.length) {
      replace(tableSlot, h('p', { class: 'muted' }, hp ? 'No instance groups.' : 'Instance groups appear when the HyperPod cluster exists.'));
      return;
    }
    const head = ['Group', 'Instance type', 'Nodes (current / target)', 'Status', 'Software', 'Capacity', 'Interfaces', 'Availability Zone', ''];
    replace(tableSlot, h('div', { class: 'table-wrap' }, h('table', { class: 'table', id: 'groups-table' },
      h('caption', { class: 'visually-hidden' }, 'Instance groups'),
      h('thead', {}, h('tr', {}, head.map((t) => h('th', { scope: 'col' }, t || h('span', { class: 'visually-hidden' }, 'Actions'))))),
      h('tbody', {}, st.groups.map((g) => {
        const az = azOf(g);
        return h('tr', { dataset: { group: g.name, current: String(g.current_count), target: String(g.target_count) } },
          h('th', { scope: 'row' }, g.name),
          h('td', { class: 'mono' }, g.instance_type),
          h('td', { class: 'nowrap' },
            h('meter', { min: 0, max: Math.max(1, g.target_count), value: g.current_count, 'aria-hidden': 'true' }), ' ',
            h('span', { class: 'counts' }, `${g.current_count} / ${g.target_count}`)),
          h('td', {}, badge(g.status)),
          h('td', { class: 'software' }, softwareText(g.software)),
          h('td', { title: g.capacity?.arn || null }, capacityText(g.capacity)),
          h('td', {}, INTERFACE_LABELS[g.interface_mode] || words(g.interface_mode)),
          h('td', {}, az || h('span', { class: 'muted', title: 'Not known: the group has no nodes and was not created here' }, '—')),
          h('td', { class: 'nowrap actions-cell' },
            h('button', {
              type: 'button', class: 'btn small', 'aria-label': `Scale ${g.name}`, dataset: { action: 'scale', focusKey: `scale:${g.name}` },
              onclick: () => openScale(g.name),
            }, 'Scale…'), ' ',
            h('button', {
              type: 'button', class: 'btn small danger-outline', 'aria-label': `Delete instance group ${g.name}…`,
              dataset: { action: 'delete', focusKey: `delete:${g.name}` }, onclick: () => deleteGroup(g.name),
            }, 'Delete…')));
      })))));
  }

  /** Closes what the activity slot shows and gives focus back to `to` (else the heading). */
  function closeActivity(to) {
    replace(activity);
    const target = to && to.isConnected ? to : el.querySelector('#groups-title');
    if (!target.matches('button, a[href], input, select')) target.setAttribute('tabindex', '-1');
    target.focus();
  }

  function editorFrame(kind, title, ...children) {
    const opener = document.activeElement;
    const heading = h('h3', { tabindex: '-1' }, title);
    const frame = h('div', { class: 'editor card inset', dataset: { editor: kind } },
      h('div', { class: 'activity-head' }, heading,
        h('button', { type: 'button', class: 'btn small ghost', onclick: () => closeActivity(opener), 'aria-label': `Close: ${title}` }, 'Close')),
      children);
    // Escape closes the editor (not while a dialog is open above it).
    frame.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && !document.querySelector('dialog[open]')) {
        e.preventDefault();
        closeActivity(opener);
      }
    });
    replace(activity, frame);
    frame.scrollIntoView({ block: 'nearest' });
    return { frame, heading };
  }

  // ---- scale --------------------------------------------------------------------------------

  function openScale(groupName) {
    const g = st.groups.find((x) => x.name === groupName);
    if (!g) return;
    const az = azOf(g) || '';
    const count = h('input', {
      id: id('scale-count'), type: 'number', min: 0, step: 1, inputmode: 'numeric', value: String(g.target_count),
      dataset: { field: 'patch.count' }, autocomplete: 'off',
    });
    const actual = { instance_type: g.instance_type, capacity: g.capacity || { type: 'on_demand' }, interface_mode: g.interface_mode, availability_zone: az };
    const shown = {
      instance_type: g.instance_type,
      capacity: capacityText(g.capacity) + (g.capacity?.arn ? ` (${g.capacity.arn})` : ''),
      interface_mode: INTERFACE_LABELS[g.interface_mode] || words(g.interface_mode),
      availability_zone: az || 'not known',
    };
    const fixedSlot = h('div', { class: 'fixed-grid' });
    const controls = {};
    let unlocked = false;
    const renderReadOnly = () => {
      replace(fixedSlot, FIXED.map(([key, label]) => {
        const input = h('input', { id: id(`fixed-${key}`), readOnly: true, value: shown[key], dataset: { field: `patch.${key}` }, 'aria-readonly': 'true' });
        return h('div', { class: 'field fixed' }, h('label', { for: input.id }, label), input);
      }));
    };
    const unlock = async () => {
      unlocked = true;
      unlockBtn.hidden = true;
      unlockNote.hidden = false;
      let ctx = { zones: [], types: [] };
      try {
        ctx = await regionContext(st.region);
      } catch { /* the selects keep the current values only */ }
      const types = ctx.types.length ? ctx.types : [{ instance_type: g.instance_type, availability_zones: [az], info: null }];
      controls.instance_type = h('select', { id: id('fixed-type'), dataset: { field: 'patch.instance_type' } });
      typeOptions(controls.instance_type, types, null, g.instance_type);
      controls.capacity = h('select', { id: id('fixed-cap'), dataset: { field: 'patch.capacity' } },
        Object.entries(CAPACITY_LABELS).map(([v, t]) => h('option', { value: v, selected: v === actual.capacity.type }, t)));
      controls.arn = h('input', {
        id: id('fixed-arn'), autocomplete: 'off', spellcheck: 'false', value: actual.capacity.arn || '',
        placeholder: 'arn:aws:sagemaker:<region>:<account>:training-plan/<name>', dataset: { field: 'patch.capacity.arn' },
      });
      const arnField = field('Training plan ARN', controls.arn);
      arnField.hidden = controls.capacity.value !== 'training_plan';
      controls.capacity.addEventListener('change', () => { arnField.hidden = controls.capacity.value !== 'training_plan'; });
      controls.interface_mode = h('select', { id: id('fixed-if'), dataset: { field: 'patch.interface_mode' } },
        Object.entries(INTERFACE_LABELS).map(([v, t]) => h('option', { value: v, selected: v === actual.interface_mode }, t)));
      const zones = ctx.zones.length ? ctx.zones.map((z) => z.name) : [az].filter(Boolean);
      controls.availability_zone = h('select', { id: id('fixed-az'), dataset: { field: 'patch.availability_zone' } },
        zones.map((z) => h('option', { value: z, selected: z === az }, z)));
      replace(fixedSlot,
        field('Instance type', controls.instance_type),
        h('div', {}, field('Capacity type', controls.capacity), arnField),
        field('Network interfaces', controls.interface_mode),
        field('Availability Zone', controls.availability_zone));
      controls.capacity.focus();
      invalidate();
    };
    renderReadOnly();
    const unlockBtn = h('button', { type: 'button', class: 'btn small ghost', onclick: unlock }, 'Ask to change a fixed setting…');
    const unlockNote = h('p', { class: 'notice warn small-text', role: 'note', hidden: true },
      'HyperPod fixes these when a group is created. Change one only to see what the control plane says: it refuses what cannot be changed in place, and the message appears next to the field.');
    const likeThis = h('button', { type: 'button', class: 'btn small', onclick: () => openAdd(desiredSettings()) }, 'Add a group like this…');
    const reviewBtn = h('button', { type: 'submit', class: 'btn primary' }, 'Review change');
    const review = h('div', { class: 'review', hidden: true, tabindex: '-1', 'aria-live': 'polite' });
    const form = h('form', { novalidate: true, class: 'editor-form' },
      h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' }),
      h('div', { class: 'scale-grid' },
        field('Target node count', count,
          `Now ${g.current_count} running of ${g.target_count}. Zero keeps the group and its settings with no instances (scale from zero).`),
        h('fieldset', { class: 'fixed-set' },
          h('legend', {}, 'Fixed for the group’s lifetime'),
          fixedSlot,
          h('p', { class: 'help' }, 'Changing one of these needs a new group: add one with the settings you want, move the work to it, then scale this one to zero or delete it.'),
          h('div', { class: 'actions tight' }, likeThis, unlockBtn),
          unlockNote)),
      h('div', { class: 'actions' }, reviewBtn, h('span', { class: 'muted small-text' }, 'Only the count you set is sent; nothing changes before you apply.')),
      review);
    const { frame } = editorFrame('scale', `Scale instance group ${g.name}`, form);
    frame.dataset.group = g.name;
    count.focus();
    count.select();

    function desiredSettings() {
      const d = { ...actual, capacity: { ...actual.capacity } };
      if (unlocked) {
        d.instance_type = controls.instance_type.value;
        d.capacity = controls.capacity.value === 'training_plan'
          ? { type: 'training_plan', arn: controls.arn.value.trim() } : { type: controls.capacity.value };
        d.interface_mode = controls.interface_mode.value;
        d.availability_zone = controls.availability_zone.value;
      }
      return { ...d, count: whole(count.value) ?? 1, name: `${g.name}-2` };
    }

    /** {count} plus, only when asked to, the fixed settings that differ from the group's. */
    function body() {
      // An empty count goes as "" so the control plane names the field (null would mean "unchanged").
      const b = { count: count.value.trim() === '' ? '' : whole(count.value) };
      if (unlocked) {
        const d = desiredSettings();
        for (const [key] of FIXED) {
          if (JSON.stringify(d[key]) !== JSON.stringify(actual[key])) b[key] = d[key];
        }
      }
      return b;
    }

    function invalidate() {
      review.hidden = true;
      replace(review);
    }
    form.addEventListener('input', invalidate);
    form.addEventListener('change', invalidate);

    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      clearFindings(form);
      const b = body();
      const path = `/api/clusters/${api.seg(name)}/instance-groups/${api.seg(g.name)}`;
      reviewBtn.disabled = true;
      reviewBtn.setAttribute('aria-busy', 'true');
      try {
        const { data } = await api.patch(path, b, { query: { dry_run: true } });
        renderReview(path, b, data);
      } catch (err) {
        if (err.status === 401) return;
        if (err.findings.length) {
          showFindings(form, err, { prefixes: ['patch'] });
          const fixed = err.findings.some((f) => FIXED.some(([k]) => f.field === `patch.${k}` || f.field.startsWith(`patch.${k}.`)));
          if (fixed) {
            replace(review, h('div', { class: 'notice', role: 'note' },
              h('p', {}, 'A fixed setting cannot be changed in place. Add a new group with the settings you want instead.'),
              h('button', { type: 'button', class: 'btn small primary', onclick: () => openAdd(desiredSettings()) }, 'Add a group with these settings…')));
            review.hidden = false;
          }
        } else {
          replace(review, refusal(err));
          review.hidden = false;
        }
      } finally {
        reviewBtn.disabled = false;
        reviewBtn.removeAttribute('aria-busy');
      }
    });

    function renderReview(path, b, data) {
      const lines = planLines(data.plan, LABELS);
      const checks = Array.isArray(data.checks) ? data.checks : [];
      const failed = failedChecks(checks);
      if (failed) showFindings(form, failed, { focus: false, prefixes: ['patch'] });
      if (!lines.length) {
        replace(review, h('div', { class: 'notice muted no-change', role: 'status' },
          h('strong', {}, 'Already in this state. '),
          `${g.name} already has a target of ${b.count} node${b.count === 1 ? '' : 's'}: nothing would change, and applying creates no operation.`));
        review.hidden = false;
        review.focus({ preventScroll: true });
        return;
      }
      const key = api.newIdempotencyKey();
      const apply = h('button', { type: 'button', class: 'btn primary', id: 'scale-apply', disabled: !!failed }, 'Apply');
      apply.addEventListener('click', () => doApply(path, b, key, apply));
      replace(review,
        h('h4', {}, 'Diff against the group’s real state'),
        diffList(lines),
        checks.length > 0 && [h('h4', {}, 'Preflight checks'), checkList(checks)],
        h('h4', {}, 'Steps'),
        stepList(data.steps),
        h('p', { class: 'muted small-text' }, planTiming(data.steps, speed), '.'),
        h('details', { class: 'json' }, h('summary', {}, 'Request body (PATCH)'), h('pre', {}, JSON.stringify(b, null, 2))),
        failed && h('p', { class: 'inline-error' }, 'Fix the failed checks (marked next to their fields) before applying.'),
        h('div', { class: 'actions' }, apply));
      review.hidden = false;
      review.focus({ preventScroll: true });
    }

    async function doApply(path, b, key, btn) {
      btn.disabled = true;
      btn.setAttribute('aria-busy', 'true');
      try {
        const { status, data } = await api.patch(path, b, { idempotencyKey: key });
        if (status === 202 && data && data.operation) {
          followOperation(activity, data.operation, {
            title: `Scale ${g.name} to ${b.count}`, speed, onSettled: () => reload(), onClose: () => closeActivity(),
          });
        } else {
          replace(review, h('div', { class: 'notice muted no-change', role: 'status' },
            h('strong', {}, 'Already in this state. '), (data && data.message) || 'Nothing was done.'));
          announce('Already in this state: nothing was done');
        }
      } catch (err) {
        if (err.status === 401) return;
        btn.disabled = false;
        btn.removeAttribute('aria-busy');
        if (err.findings.length) showFindings(form, err, { prefixes: ['patch'] });
        else review.append(refusal(err));
      }
    }
  }

  // ---- add ----------------------------------------------------------------------------------

  async function openAdd(initial = {}) {
    const uid = id('ag');
    const nameIn = h('input', {
      id: `${uid}-name`, autocomplete: 'off', spellcheck: 'false', dataset: { field: 'group.name' },
      value: initial.name || (st.groups.some((g) => g.name === 'workers') ? `group-${st.groups.length + 1}` : 'workers'),
    });
    const az = h('select', { id: `${uid}-az`, dataset: { field: 'group.availability_zone' } }, h('option', { value: '' }, 'Loading zones…'));
    const type = h('select', { id: `${uid}-type`, dataset: { field: 'group.instance_type' } }, h('option', { value: '' }, 'Loading instance types…'));
    const info = h('p', { class: 'help type-info', 'aria-live': 'polite' });
    const count = h('input', {
      id: `${uid}-count`, type: 'number', min: 0, step: 1, inputmode: 'numeric', value: String(initial.count ?? 1),
      dataset: { field: 'group.count' },
    });
    const capName = `${uid}-cap`;
    const cap = initial.capacity?.type || 'on_demand';
    const capacity = h('fieldset', { class: 'radios', dataset: { field: 'group.capacity' } }, h('legend', {}, 'Capacity type'),
      [['on_demand', 'On-demand', null], ['training_plan', 'Training plan', 'reserved capacity in the plan’s zone'],
        ['spot', 'Spot', 'interruptible']].map(([v, t, help]) => {
        const rid = id('cap');
        return h('div', { class: 'check' }, h('input', { type: 'radio', name: capName, id: rid, value: v, checked: v === cap }),
          h('label', { for: rid }, t, help && h('span', { class: 'muted' }, ` — ${help}`)));
      }));
    const arn = h('input', {
      id: `${uid}-arn`, autocomplete: 'off', spellcheck: 'false', value: initial.capacity?.arn || '',
      placeholder: 'arn:aws:sagemaker:<region>:<account>:training-plan/<name>', dataset: { field: 'group.capacity.arn' },
    });
    const arnField = field('Training plan ARN', arn, 'The plan’s zone and instance type must match this group.');
    const spotNote = h('p', { class: 'help note' }, 'Spot groups cannot run elastic training jobs.');
    const efa = h('input', { type: 'checkbox', id: `${uid}-efa`, checked: initial.interface_mode === 'efa_only' });
    const stress = h('input', { type: 'checkbox', id: `${uid}-stress`, dataset: { field: 'group.deep_health_checks.stress' } });
    const conn = h('input', { type: 'checkbox', id: `${uid}-conn`, dataset: { field: 'group.deep_health_checks.connectivity' } });
    const capValue = () => capacity.querySelector('input:checked')?.value || 'on_demand';
    const syncCap = () => {
      arnField.hidden = capValue() !== 'training_plan';
      spotNote.hidden = capValue() !== 'spot';
    };
    syncCap();
    const reviewBtn = h('button', { type: 'submit', class: 'btn primary' }, 'Review plan');
    const planSlot = h('div', { class: 'review', tabindex: '-1', hidden: true });
    const form = h('form', { novalidate: true, class: 'editor-form' },
      h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' }),
      h('p', { class: 'help' }, 'Capacity type, interface mode and placement are decided together, in one operation, and stay fixed for the group’s lifetime. The control plane places the group in a /20 compute subnet of the zone, planned if the cluster has none there.'),
      h('div', { class: 'grid-3' },
        field('Group name', nameIn),
        field('Availability Zone', az),
        field('Instance count', count, 'Zero is allowed (scale from zero).'),
        h('div', { class: 'field span-2' }, h('label', { for: type.id }, 'Instance type'), type, info)),
      h('div', { class: 'grid-3 add-options' },
        h('div', {}, capacity, arnField, spotNote),
        h('fieldset', { class: 'checks', dataset: { field: 'group.interface_mode' } }, h('legend', {}, 'Network interfaces'),
          h('div', { class: 'check' }, efa, h('label', { for: efa.id }, 'EFA-only interfaces',
            h('span', { class: 'muted' }, ' — no IP traffic on the EFA devices; high-end accelerators only')))),
        h('fieldset', { class: 'checks', dataset: { field: 'group.deep_health_checks' } }, h('legend', {}, 'Deep health checks before nodes accept work'),
          h('div', { class: 'check' }, stress, h('label', { for: stress.id }, 'Accelerator stress test')),
          h('div', { class: 'check' }, conn, h('label', { for: conn.id }, 'EFA connectivity test')))),
      h('div', { class: 'actions' }, reviewBtn, h('span', { class: 'muted small-text' }, 'Nothing is created until you confirm the plan.')),
      planSlot);
    editorFrame('add', 'Add instance group', form);
    nameIn.focus();

    let types = [];
    const showInfo = () => { info.textContent = typeInfo(types.find((t) => t.instance_type === type.value)); };
    const fillTypes = () => { typeOptions(type, types, az.value, type.value || initial.instance_type); showInfo(); };
    try {
      const ctx = await regionContext(st.region);
      types = ctx.types;
      const prefer = initial.availability_zone || st.knownAz.values().next().value || ctx.zones[0]?.name;
      replace(az, ctx.zones.length
        ? ctx.zones.map((z) => h('option', { value: z.name, selected: z.name === prefer }, `${z.name} (${z.zone_id})`))
        : h('option', { value: '' }, `No zones found in ${st.region}`));
      fillTypes();
    } catch (err) {
      replace(az, h('option', { value: '' }, 'Zones not available'));
      info.textContent = `Could not read the zones and instance types of ${st.region}: ${err.message}`;
    }

    let plan = null;
    const invalidate = () => {
      if (!plan) return;
      plan = null;
      replace(planSlot, h('p', { class: 'notice muted', role: 'status' }, 'The request changed; review the plan again.'));
    };
    az.addEventListener('change', fillTypes);
    type.addEventListener('change', showInfo);
    capacity.addEventListener('change', () => {
      syncCap();
      if (!arnField.hidden) arn.focus();
    });
    form.addEventListener('input', invalidate);
    form.addEventListener('change', invalidate);

    const body = () => {
      const c = capValue();
      return {
        name: nameIn.value.trim(),
        instance_type: type.value,
        count: whole(count.value),
        availability_zone: az.value,
        capacity: c === 'training_plan' ? { type: c, arn: arn.value.trim() } : { type: c },
        interface_mode: efa.checked ? 'efa_only' : 'standard',
        deep_health_checks: { stress: stress.checked, connectivity: conn.checked },
      };
    };
    const path = `/api/clusters/${api.seg(name)}/instance-groups`;

    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      clearFindings(form);
      const b = body();
      reviewBtn.disabled = true;
      reviewBtn.setAttribute('aria-busy', 'true');
      try {
        const { data } = await api.post(path, b, { query: { dry_run: true } });
        plan = { b, data, key: api.newIdempotencyKey() };
        renderPlan();
      } catch (err) {
        if (err.status === 401) return;
        if (err.findings.length) showFindings(form, err, { prefixes: ['group'] });
        else {
          replace(planSlot, refusal(err));
          planSlot.hidden = false;
        }
      } finally {
        reviewBtn.disabled = false;
        reviewBtn.removeAttribute('aria-busy');
      }
    });

    function renderPlan() {
      const { b, data } = plan;
      const checks = Array.isArray(data.checks) ? data.checks : [];
      const failed = failedChecks(checks);
      if (failed) showFindings(form, failed, { focus: false, prefixes: ['group'] });
      const submit = h('button', { type: 'button', class: 'btn primary', id: 'add-group-submit', disabled: !!failed }, 'Add instance group');
      submit.addEventListener('click', () => create(submit));
      replace(planSlot,
        h('h4', {}, `Plan: add ${b.name} to ${name}`),
        h('p', {}, `${data.steps.length} step${data.steps.length === 1 ? '' : 's'}, ${planTiming(data.steps, speed)}. Nothing has been created yet.`),
        checks.length > 0 && h('div', { class: 'preflight' }, h('h4', {}, 'Preflight checks'), checkList(checks)),
        failed && h('p', { class: 'inline-error' }, 'Fix the failed checks (marked next to their fields, with the remedy) before adding the group.'),
        h('h4', {}, 'Steps'),
        stepList(data.steps),
        h('details', { class: 'json' }, h('summary', {}, 'Request as it will be recorded'), h('pre', {}, JSON.stringify(data.request, null, 2))),
        h('div', { class: 'actions' }, submit));
      planSlot.hidden = false;
      planSlot.focus({ preventScroll: true });
      planSlot.scrollIntoView({ block: 'nearest' });
    }

    async function create(btn) {
      if (!plan) return;
      btn.disabled = true;
      btn.setAttribute('aria-busy', 'true');
      try {
        const { data } = await api.post(path, plan.b, { idempotencyKey: plan.key });
        followOperation(activity, data.operation, {
          title: `Add instance group ${plan.b.name}`, speed, onSettled: () => reload(), onClose: () => closeActivity(addBtn),
        });
      } catch (err) {
        if (err.status === 401) return;
        btn.disabled = false;
        btn.removeAttribute('aria-busy');
        if (err.findings.length) showFindings(form, err, { prefixes: ['group'] });
        else planSlot.append(refusal(err));
      }
    }
  }

  // ---- delete -------------------------------------------------------------------------------

  async function deleteGroup(groupName) {
    const g = st.groups.find((x) => x.name === groupName);
    if (!g) return;
    const path = `/api/clusters/${api.seg(name)}/instance-groups/${api.seg(g.name)}`;
    const key = api.newIdempotencyKey();
    const planSlot = h('div', { class: 'plan-mini', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Reading the plan…'));
    const refusalSlot = h('div', {});
    api.del(path, { query: { dry_run: true } }).then(({ data }) => {
      replace(planSlot, h('p', {}, 'These steps will run:'), stepList(data.steps));
    }).catch((err) => replace(planSlot, h('p', { class: 'inline-error' }, err.message)));
    const op = await openDialog({
      title: `Delete instance group ${g.name}?`,
      body: [
        h('p', {}, 'Its ', h('strong', {}, `${g.current_count} node${g.current_count === 1 ? '' : 's'}`),
          ' are terminated and their local volumes are lost. The other groups and the cluster stay as they are.'),
        h('p', { class: 'muted' }, 'To keep the group with no instances, scale it to zero instead.'),
        planSlot,
        refusalSlot,
      ],
      confirmLabel: 'Delete group',
      danger: true,
      typeToConfirm: g.name,
      onConfirm: async () => {
        replace(refusalSlot);
        try {
          const { data } = await api.del(path, { idempotencyKey: key });
          return data.operation;
        } catch (err) {
          if (err.status !== 401) {
            replace(refusalSlot, refusal(err));
            err.shown = true;
          }
          throw err;
        }
      },
    });
    if (op) followOperation(activity, op, { title: `Delete instance group ${g.name}`, speed, onSettled: () => reload(), onClose: () => closeActivity() });
  }

  // ---- platform software update --------------------------------------------------------------

  /** UpdateClusterSoftware on the chosen groups: the plan first, then a confirmation. */
  async function updateSoftware() {
    if (!st.groups.length) return;
    const path = `/api/clusters/${api.seg(name)}/software-update`;
    const key = api.newIdempotencyKey();
    const boxes = st.groups.map((g) => h('input', { type: 'checkbox', id: id('sw'), checked: true, value: g.name }));
    const release = h('input', { id: id('sw-release'), name: 'release', placeholder: 'latest', autocomplete: 'off', spellcheck: 'false', dataset: { field: 'instance_groups[0].image_release_version' } });
    const batch = h('input', { id: id('sw-batch'), name: 'batch', placeholder: 'whole group', autocomplete: 'off', dataset: { field: 'deployment.max_batch.value' } });
    const planSlot = h('div', { class: 'plan-mini', 'aria-live': 'polite' });
    const refusalSlot = h('div', {});
    function request() {
      const chosen = boxes.filter((b) => b.checked).map((b) => b.value);
      const version = release.value.trim();
      const all = chosen.length === st.groups.length && !version;
      const req = all ? {} : { instance_groups: chosen.map((g) => (version ? { name: g, image_release_version: version } : { name: g })) };
      const b = batch.value.trim();
      if (b) {
        const pct = b.endsWith('%');
        req.deployment = { max_batch: { type: pct ? 'capacity_percentage' : 'instance_count', value: Number.parseInt(b, 10) || 0 } };
      }
      return req;
    }
    async function readPlan() {
      replace(planSlot, h('p', { class: 'muted' }, 'Reading the plan…'));
      try {
        const { data } = await api.post(path, request(), { query: { dry_run: true } });
        const labels = Object.fromEntries(st.groups.map((g) => [`instance_groups.${g.name}.software`, g.name]));
        const lines = planLines(data.plan, labels);
        replace(planSlot, lines.length
          ? [h('p', {}, 'Software now → after the update:'), diffList(lines), h('p', { class: 'muted small-text' }, planTiming(data.steps, speed), '.')]
          : h('p', { class: 'notice muted no-change', role: 'status' }, h('strong', {}, 'Already in this state. '), 'These groups already run this software: applying creates no operation.'));
      } catch (err) {
        if (err.status !== 401) replace(planSlot, refusal(err));
      }
    }
    for (const el2 of [...boxes, release, batch]) el2.addEventListener('change', readPlan);
    readPlan();
    const op = await openDialog({
      title: 'Update the software of instance groups?',
      className: 'software-update-dialog',
      body: h('div', { class: 'dialog-fields' },
        h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' }),
        h('p', {}, 'SageMaker moves the chosen groups to a new HyperPod AMI, a batch of nodes at a time. Each updated node gets a new root volume (data on it is lost) and is NotReady while it is updated; HyperPod does not drain workloads first.'),
        h('fieldset', { class: 'field', dataset: { field: 'instance_groups' } },
          h('legend', {}, 'Instance groups'),
          st.groups.map((g, i) => h('div', { class: 'field check' }, boxes[i],
            h('label', { for: boxes[i].id }, h('strong', {}, g.name), ' ', h('span', { class: 'muted' }, softwareText(g.software)))))),
        field('Release (MAJOR.MINOR.PATCH)', release, 'Empty: the latest HyperPod AMI release.'),
        field('Batch size', batch, 'Nodes updated at a time: a number, or a percentage of each group such as 25%. Empty: SageMaker’s default.'),
        planSlot,
        refusalSlot),
      confirmLabel: 'Update software',
      danger: true,
      onConfirm: async (form) => {
        clearFindings(form);
        replace(refusalSlot);
        try {
          const { data } = await api.post(path, request(), { idempotencyKey: key });
          if (!data.operation) announce(data.message || 'Already in this state: nothing was done.');
          return data.operation;
        } catch (err) {
          if (err.findings.length) {
            showFindings(form, err, { compact: true });
            err.shown = true;
          } else if (err.status !== 401) {
            replace(refusalSlot, refusal(err));
            err.shown = true;
          }
          throw err;
        }
      },
    });
    if (op) followOperation(activity, op, { title: 'Update instance group software', speed, onSettled: () => reload(), onClose: () => closeActivity(softwareBtn) });
  }

  return { el, update, openAdd, openScale, updateSoftware };
}

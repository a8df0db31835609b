// Task governance on the cluster page: the teams (their namespace and Kueue queue, the GPUs
// each is guaranteed per instance type and may borrow of other teams' idle quota, how it
// shares), what each team runs now (admitted and queued jobs, GPUs in use and borrowed — summed
// from the jobs' admission, which the control plane reads from Kueue's Workloads and
// ClusterQueues) and the priority classes with the label a job names them by. "Edit
// governance…" opens a form of the whole desired state (priority classes, fair share, teams and
// their quotas); Review sends it as a dry run (PUT /api/clusters/{cluster}/governance?dry_run=true)
// and shows the server's diff and steps, findings next to their fields; Apply starts the
// operation and follows it in place. Reads GET …/governance and GET …/jobs on each refresh of the
// page; a cluster without HyperPod has no governance and says so.

import { h, replace, announce } from '../../lib/dom.js';
import * as api from '../../lib/api.js';
import { clearFindings, showFindings } from '../../lib/forms.js';
import { diffList, planLines, stepList, planTiming, refusal, followOperation, regionContext, whole } from '../../components/plan.js';

const SHARING = [
  ['LendAndBorrow', 'Lend and borrow'],
  ['Lend', 'Lend only'],
  ['DontLend', 'Do not lend'],
];
const PREEMPT = [
  ['LowerPriority', 'Higher-priority jobs preempt lower ones'],
  ['Never', 'Never preempt the team’s own jobs'],
];
/** SageMaker's borrow limit when none is set (percent of the team's quota). */
const DEFAULT_BORROW_LIMIT = 50;

/** GPUs of a quota: its accelerators, or its instances × the type's accelerators. */
function quotaGpus(q, perType) {
  if (q.accelerators) return q.accelerators;
  const per = perType.get(q.instance_type);
  return per === undefined ? null : (q.count || 0) * per;
}

const gpus = (n) => `${n} GPU${n === 1 ? '' : 's'}`;

/** What a team's jobs hold and wait for, from their admission. */
function usageOf(team, jobs) {
  const mine = jobs.filter((j) => j.admission && j.admission.team === team);
  const admitted = mine.filter((j) => j.admission.state === 'admitted');
  const borrowed = mine.map((j) => j.admission.team_borrowed).find((b) => b !== undefined && b !== null);
  return {
    admitted: admitted.length,
    queued: mine.filter((j) => j.admission.state === 'queued' || j.admission.state === 'preempted').length,
    inUse: admitted.reduce((n, j) => n + (j.admission.accelerators || 0), 0),
    borrowed: borrowed || 0,
  };
}

export function governanceSection({ name, speed, reload }) {
  const status = h('p', { id: 'governance-summary', role: 'status' }, 'Reading task governance…');
  const classesSlot = h('div', {});
  const teamsSlot = h('div', {});
  const editSlot = h('div', {});
  const activity = h('div', { id: 'governance-activity' });
  const errorSlot = h('div', {});
  const editBtn = h('button', { type: 'button', class: 'btn small', id: 'governance-edit', hidden: true }, 'Edit governance…');
  const el = h('section', { class: 'card', 'aria-labelledby': 'governance-title', id: 'governance-card' },
    h('div', { class: 'section-head' }, h('h2', { id: 'governance-title' }, 'Task governance'), editBtn),
    h('p', { class: 'help' }, 'Teams get guaranteed GPUs per instance type and may borrow what other teams leave idle; ',
      'Kueue admits their jobs by quota and priority (the HyperPod task governance add-on).'),
    status, classesSlot, teamsSlot, errorSlot, editSlot, activity);
  let view = null;
  let cluster = null;
  let perType = new Map();
  let reading = false;
  let editing = false;

  editBtn.addEventListener('click', () => openEditor());

  async function update(c) {
    if (c) cluster = c;
    if (reading || !cluster) return;
    if (!cluster.hyperpod_cluster) {
      replace(status, h('span', { class: 'muted' }, 'No HyperPod cluster: task governance needs one.'));
      editBtn.hidden = true;
      return;
    }
    reading = true;
    try {
      const [g, jobs, ctx] = await Promise.all([
        api.get(`/api/clusters/${api.seg(name)}/governance`),
        api.list(`/api/clusters/${api.seg(name)}/jobs`).catch(() => []),
        regionContext(cluster.region).catch(() => null),
      ]);
      if (ctx) perType = new Map(ctx.types.filter((t) => t.info).map((t) => [t.instance_type, t.info.accelerators || 0]));
      view = g;
      replace(errorSlot);
      render(g, jobs);
    } catch (err) {
      if (err.status === 401) return;
      replace(errorSlot, h('p', { class: 'notice warn', role: 'status' }, h('strong', {}, 'Task governance unavailable. '), err.message));
    } finally {
      reading = false;
    }
  }

  function render(g, jobs) {
    const spec = g.governance;
    editBtn.hidden = !g.managed || editing;
    if (!spec.enabled) {
      replace(status, h('strong', {}, 'Off. '), 'Jobs run as soon as their pods fit; no team has a quota.',
        !g.managed && h('span', { class: 'inline-error' }, ' Governance on this cluster is not InstantStart’s: it is shown, not changed.'));
      replace(classesSlot);
      replace(teamsSlot);
      return;
    }
    replace(status,
      h('strong', {}, 'On. '),
      `Add-on ${g.addon} ${g.addon_installed ? 'installed' : 'not installed'}; `,
      `scheduler config ${g.scheduler_config_status || 'absent'}; `,
      spec.fair_share ? 'idle GPUs lent by fair-share weight.' : 'idle GPUs lent first come, first served.',
      !g.managed && h('span', { class: 'inline-error' }, ' Not InstantStart’s: shown, not changed.'));
    replace(classesSlot,
      h('h3', {}, 'Priority classes'),
      spec.priority_classes.length
        ? h('ul', { class: 'inline-list', id: 'governance-classes' }, [...spec.priority_classes]
          .sort((a, b) => b.weight - a.weight)
          .map((p) => h('li', { dataset: { class: p.name } }, h('strong', {}, p.name), ` weight ${p.weight} · `,
            h('span', { class: 'mono' }, `kueue.x-k8s.io/priority-class: ${p.name}-priority`))))
        : h('p', { class: 'muted' }, 'None: every job ranks 0.'));
    const placement = new Map(g.teams.map((t) => [t.team, t]));
    const rows = spec.teams.map((t) => {
      const guaranteed = t.quotas.map((q) => ({ q, gpus: quotaGpus(q, perType) }));
      const total = guaranteed.reduce((n, x) => n + (x.gpus || 0), 0);
      const borrows = t.sharing === 'LendAndBorrow' || t.sharing === undefined;
      const limit = t.borrow_limit || DEFAULT_BORROW_LIMIT;
      const borrowable = borrows ? Math.ceil((total * limit) / 100) : 0;
      const u = usageOf(t.name, jobs);
      const p = placement.get(t.name);
      return h('tr', { dataset: { team: t.name } },
        h('th', { scope: 'row' }, h('strong', {}, t.name),
          p && h('div', { class: 'small-text muted mono' }, `${p.namespace} · ${p.queue}`)),
        h('td', { class: 'guaranteed', dataset: { gpus: total } },
          guaranteed.map(({ q, gpus: n }) => h('div', {}, `${n === null ? '?' : gpus(n)} on ${q.instance_type}`,
            q.count ? h('span', { class: 'muted' }, ` (${q.count} instance${q.count === 1 ? '' : 's'})`) : null))),
        h('td', { class: 'borrowable', dataset: { gpus: borrowable } },
          borrows ? `${borrowable} (${limit}% of quota)` : h('span', { class: 'muted' }, '0')),
        h('td', {}, SHARING.find(([v]) => v === (t.sharing || 'LendAndBorrow'))[1]),
        h('td', { class: 'in-use', dataset: { gpus: u.inUse, borrowed: u.borrowed } },
          gpus(u.inUse), u.borrowed ? h('span', { class: 'muted' }, ` (${u.borrowed} borrowed)`) : null),
        h('td', { class: 'admitted', dataset: { count: u.admitted } }, String(u.admitted)),
        h('td', { class: 'queued', dataset: { count: u.queued } }, String(u.queued)),
        h('td', {}, p ? p.status : ''));
    });
    replace(teamsSlot,
      h('h3', {}, 'Teams'),
      rows.length
        ? h('div', { class: 'table-wrap' }, h('table', { class: 'table', id: 'governance-teams' },
          h('thead', {}, h('tr', {}, ['Team', 'Guaranteed', 'May borrow', 'Sharing', 'In use', 'Admitted', 'Queued', 'Quota']
            .map((c) => h('th', { scope: 'col' }, c)))),
          h('tbody', {}, rows)))
        : h('p', { class: 'muted' }, 'No teams.'));
  }

  // ---- the editor ---------------------------------------------------------------------------

  function openEditor() {
    if (!view) return;
    editing = true;
    editBtn.hidden = true;
    const spec = JSON.parse(JSON.stringify(view.governance));
    if (!spec.enabled) {
      spec.enabled = true;
      spec.fair_share = true;
    }
    const types = (cluster.hyperpod ? cluster.hyperpod.instance_groups : []).map((g) => g.instance_type);
    const typeOptions = [...new Set([...types, ...spec.teams.flatMap((t) => t.quotas.map((q) => q.instance_type))])];
    const classesBox = h('div', { id: 'governance-form-classes' });
    const teamsBox = h('div', { id: 'governance-form-teams' });
    const fairShare = h('input', { type: 'checkbox', id: 'governance-fair-share', checked: spec.fair_share !== false, dataset: { field: 'fair_share' } });
    const review = h('div', { class: 'plan-review', id: 'governance-plan', tabindex: '-1', hidden: true });
    const reviewBtn = h('button', { type: 'submit', class: 'btn primary', id: 'governance-review' }, 'Review changes');
    const form = h('form', { class: 'form', id: 'governance-form', novalidate: true },
      h('div', { class: 'error-summary', tabindex: '-1', hidden: true }),
      h('div', { class: 'field check' }, fairShare, h('label', { for: 'governance-fair-share' }, 'Lend idle GPUs by fair-share weight')),
      h('h3', {}, 'Priority classes'), classesBox,
      h('button', { type: 'button', class: 'btn small', id: 'governance-add-class', onclick: () => { addClass({ name: '', weight: 0 }); invalidate(); } }, 'Add a priority class'),
      h('h3', {}, 'Teams'), teamsBox,
      h('button', { type: 'button', class: 'btn small', id: 'governance-add-team', onclick: () => { addTeam({ name: '', quotas: [{ instance_type: typeOptions[0] || '', accelerators: 1 }] }); invalidate(); } }, 'Add a team'),
      h('div', { class: 'actions' }, reviewBtn,
        h('button', { type: 'button', class: 'btn ghost', id: 'governance-cancel', onclick: close }, 'Cancel')),
      review);

    function input(leaf, value, attrs = {}) {
      return h('input', { type: 'text', value: value ?? '', dataset: { field: leaf, leaf }, autocomplete: 'off', spellcheck: 'false', ...attrs });
    }
    function labelled(text, control) {
      return h('label', { class: 'field inline' }, h('span', { class: 'label' }, text), control);
    }
    function select(leaf, value, options) {
      return h('select', { dataset: { field: leaf, leaf } }, options.map(([v, t]) => h('option', { value: v, selected: v === value }, t)));
    }

    function addClass(p) {
      const row = h('div', { class: 'gov-row', dataset: { row: 'class' } },
        labelled('Name', input('name', p.name, { class: 'mono' })),
        labelled('Weight (0–100)', input('weight', p.weight, { inputmode: 'numeric', size: 4 })),
        h('button', { type: 'button', class: 'btn small ghost', onclick: () => { row.remove(); renumber(); invalidate(); } }, 'Remove'));
      classesBox.append(row);
      renumber();
    }

    function addTeam(t) {
      const q = t.quotas[0] || { instance_type: typeOptions[0] || '', accelerators: 1 };
      const unit = q.count ? 'count' : 'accelerators';
      const amount = input('amount', q.count ?? q.accelerators, { inputmode: 'numeric', size: 4 });
      const unitSel = select('unit', unit, [['accelerators', 'GPUs'], ['count', 'instances']]);
      const row = h('fieldset', { class: 'gov-team', dataset: { row: 'team' } },
        h('legend', {}, t.name || 'New team'),
        labelled('Team', input('name', t.name, { class: 'mono' })),
        labelled('Instance type', select('instance_type', q.instance_type, typeOptions.map((x) => [x, x]))),
        labelled('Guaranteed', amount), unitSel,
        labelled('Sharing', select('sharing', t.sharing || 'LendAndBorrow', SHARING)),
        labelled('Borrow limit (%)', input('borrow_limit', t.borrow_limit ?? '', { inputmode: 'numeric', size: 4, placeholder: String(DEFAULT_BORROW_LIMIT) })),
        labelled('Preemption', select('preempt_team_tasks', t.preempt_team_tasks || 'LowerPriority', PREEMPT)),
        labelled('Fair-share weight', input('fair_share_weight', t.fair_share_weight ?? 0, { inputmode: 'numeric', size: 4 })),
        h('button', { type: 'button', class: 'btn small ghost', onclick: () => { row.remove(); renumber(); invalidate(); } }, 'Remove team'));
      // Quotas beyond the first instance type are kept as they are.
      row.extraQuotas = t.quotas.slice(1);
      teamsBox.append(row);
      renumber();
    }

    /** Points each control's data-field at its path in the request, so findings land next to it. */
    function renumber() {
      [...classesBox.children].forEach((row, i) => {
        for (const c of row.querySelectorAll('[data-leaf]')) c.dataset.field = `priority_classes[${i}].${c.dataset.leaf}`;
      });
      [...teamsBox.children].forEach((row, i) => {
        const unit = row.querySelector('[data-leaf=unit]').value;
        for (const c of row.querySelectorAll('[data-leaf]')) {
          const leaf = c.dataset.leaf;
          c.dataset.field = leaf === 'amount' ? `teams[${i}].quotas[0].${unit}`
            : ['instance_type', 'unit'].includes(leaf) ? `teams[${i}].quotas[0].${leaf}` : `teams[${i}].${leaf}`;
        }
      });
    }

    function desired() {
      const out = { enabled: true, fair_share: fairShare.checked, priority_classes: [], teams: [] };
      for (const row of classesBox.children) {
        const v = (leaf) => row.querySelector(`[data-leaf=${leaf}]`).value.trim();
        out.priority_classes.push({ name: v('name'), weight: whole(v('weight')) });
      }
      for (const row of teamsBox.children) {
        const v = (leaf) => row.querySelector(`[data-leaf=${leaf}]`).value.trim();
        const t = { name: v('name'), quotas: [{ instance_type: v('instance_type'), [v('unit')]: whole(v('amount')) }, ...row.extraQuotas] };
        t.sharing = v('sharing');
        if (v('borrow_limit') !== '' && t.sharing === 'LendAndBorrow') t.borrow_limit = whole(v('borrow_limit'));
        t.preempt_team_tasks = v('preempt_team_tasks');
        t.fair_share_weight = whole(v('fair_share_weight') || '0');
        out.teams.push(t);
      }
      return out;
    }

    function invalidate() {
      review.hidden = true;
      replace(review);
    }
    form.addEventListener('input', invalidate);
    form.addEventListener('change', (e) => {
      if (e.target.dataset.leaf === 'unit') renumber();
      invalidate();
    });

    const path = `/api/clusters/${api.seg(name)}/governance`;
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      clearFindings(form);
      const body = desired();
      reviewBtn.disabled = true;
      reviewBtn.setAttribute('aria-busy', 'true');
      try {
        const { data } = await api.put(path, body, { query: { dry_run: true } });
        renderReview(body, data);
      } catch (err) {
        if (err.status === 401) return;
        if (err.findings.length) showFindings(form, err, { prefixes: ['governance', 'request.governance'] });
        else {
          replace(review, refusal(err));
          review.hidden = false;
        }
      } finally {
        reviewBtn.disabled = false;
        reviewBtn.removeAttribute('aria-busy');
      }
    });

    function renderReview(body, data) {
      const lines = planLines(data.plan);
      if (!lines.length) {
        replace(review, h('div', { class: 'notice muted no-change', role: 'status' },
          h('strong', {}, 'Already in this state. '), 'Nothing would change; applying creates no operation.'));
        review.hidden = false;
        review.focus({ preventScroll: true });
        return;
      }
      const key = api.newIdempotencyKey();
      const apply = h('button', { type: 'button', class: 'btn primary', id: 'governance-apply' }, 'Apply');
      apply.addEventListener('click', () => doApply(body, key, apply));
      replace(review,
        h('h4', {}, 'Diff against what SageMaker holds'),
        diffList(lines),
        h('h4', {}, 'Steps'),
        stepList(data.steps),
        h('p', { class: 'muted small-text' }, planTiming(data.steps, speed), '.'),
        h('details', { class: 'json' }, h('summary', {}, 'Request body (PUT)'), h('pre', {}, JSON.stringify(body, null, 2))),
        h('div', { class: 'actions' }, apply));
      review.hidden = false;
      review.focus({ preventScroll: true });
    }

    async function doApply(body, key, btn) {
      btn.disabled = true;
      btn.setAttribute('aria-busy', 'true');
      try {
        const { status: code, data } = await api.put(path, body, { idempotencyKey: key });
        close();
        if (code === 202 && data && data.operation) {
          followOperation(activity, data.operation, {
            title: 'Set task governance', speed, onSettled: () => { update(); reload(); },
          });
        } else {
          announce('Already in this state: nothing was done');
        }
      } catch (err) {
        if (err.status === 401) return;
        btn.disabled = false;
        btn.removeAttribute('aria-busy');
        if (err.findings.length) showFindings(form, err, { prefixes: ['governance', 'request.governance'] });
        else replace(review, refusal(err));
      }
    }

    function close() {
      editing = false;
      replace(editSlot);
      editBtn.hidden = !(view && view.managed);
    }

    spec.priority_classes.forEach(addClass);
    spec.teams.forEach(addTeam);
    if (!spec.teams.length) addTeam({ name: '', quotas: [{ instance_type: typeOptions[0] || '', accelerators: 1 }] });
    replace(editSlot, h('section', { class: 'editor', 'aria-labelledby': 'governance-form-title' },
      h('h3', { id: 'governance-form-title' }, 'Edit task governance'),
      h('p', { class: 'help' }, 'The whole desired state: teams left out lose their quota. Review shows the server’s diff first.'),
      form));
    form.querySelector('input')?.focus();
  }

  return { el, update, dispose() {} };
}

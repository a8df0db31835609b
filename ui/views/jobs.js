// Training jobs of a cluster: the list (phase, task governance admission, recipe, runtime, pods
// and the recovery budget as a meter), the per-recipe submit form (PyTorch script, LLaMA-Factory
// and MS-Swift on the HyperPod training operator; VERL on KubeRay; with the optional team and
// priority of task governance and the cluster's FSx for Lustre volumes to mount) with a plan
// review that shows the rendered manifests (?dry_run=true) before anything is applied, and the
// job page: state, pods, conditions, events, the applied manifests and live logs over a
// WebSocket (auto-scroll that pauses when you scroll up, pod selector, reconnect), delete with
// a typed confirmation.

import { h, replace, routeHref, simTimeEl, words, announce, debounce, id, errorNotice } from '../lib/dom.js';
import * as api from '../lib/api.js';
import { badge } from '../components/status-badge.js';
import { followOperation } from '../components/plan.js';
import { workloadHead, instanceTypeOptions, manifestList, mountedVolumes, phaseBadge, recoveryMeter, podCounts, confirmedDelete, onCluster, planReviewForm, emptyList, listTable, foreignBadge, FOREIGN_TITLE } from '../components/workload-page.js';
import { formField, readForm, num, lines, pairs, prune } from '../lib/forms.js';
import { listPoller } from '../lib/polling.js';
import { metricsPanel } from '../components/metric-plot.js';
import { volumeMounts, loadVolumesInto } from '../components/volume-picker.js';

/** The recipes of the form: runtime, recipe kind, label, default image, help. */
export const RECIPES = [
  {
    key: 'torch', runtime: 'hyperpod', label: 'PyTorch script', image: 'pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime',
    help: 'A script on the shared bucket, launched with torchrun on every node (HyperPod training operator).',
  },
  {
    key: 'llama_factory', runtime: 'hyperpod', label: 'LLaMA-Factory', image: 'hiyouga/llamafactory:0.9.3',
    help: 'LLaMA-Factory with a YAML config on the bucket and key=value overrides (HyperPod training operator).',
  },
  {
    key: 'ms_swift', runtime: 'hyperpod', label: 'MS-Swift', image: 'modelscope/ms-swift:3.8.1',
    help: 'MS-Swift sft / pt / rlhf with an optional config and extra arguments (HyperPod training operator).',
  },
  {
    key: 'verl', runtime: 'ray', label: 'VERL (Ray)', image: 'verlai/verl:app-verl0.5-vllm0.9.1-mcore0.12.2-te2.2',
    help: 'VERL reinforcement learning as a RayJob (KubeRay): Hydra config and overrides.',
  },
];

const RUNTIME_LABELS = { hyperpod: 'HyperPod', ray: 'Ray', pytorch: 'Kubeflow PyTorchJob' };

/** The training history of job `job` on the tracking server of an MLflow ARN (…/mlflow-tracking-server/<name>). */
function historyHref(arn, job) {
  const name = String(arn).split('/').pop();
  return `#/history?server=${encodeURIComponent(name)}${job ? `&job=${encodeURIComponent(job)}` : ''}`;
}
/** What deleting a job does, in its confirmation. */
const DELETE_DETAIL = 'Its pods stop and every object InstantStart applied for it is removed. What it wrote to the shared bucket stays.';

const ACTIVE_PHASES = /pending|running|restarting|creating|starting/i;

// ---- list -------------------------------------------------------------------------------------

export function jobsView({ app, params }) {
  const [cluster] = params;
  const speed = app.simSpeed();
  const base = `/api/clusters/${api.seg(cluster)}/jobs`;
  const errorBox = h('div', {});
  const tableSlot = h('div', { 'aria-live': 'polite', 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Reading the training jobs…'));
  const activity = h('div', { class: 'activity-slot', id: 'jobs-activity' });
  // The training history screen (MLflow runs and their curves) lives in its own view, when present.
  const historyPath = app.hasRoute ? ['/history', '/training-history', '/mlflow'].find((p) => app.hasRoute(p)) : null;
  const list = listPoller({
    url: base, errorBox, tableSlot, render, busy: (jobs) => jobs.some((j) => ACTIVE_PHASES.test(j.phase)),
  });
  const load = list.load;

  function render(jobs) {
    if (!jobs.length) {
      replace(tableSlot, emptyList('No training jobs yet', 'Submit a PyTorch script, a LLaMA-Factory or MS-Swift fine-tune, or a VERL run.',
        routeHref('clusters', cluster, 'jobs', 'new'), 'Submit a job'));
      return;
    }
    const head = ['Job', 'Phase', 'Admission', 'Recipe', 'Runtime', 'Nodes', 'Pods', 'Recovery budget', 'Created', ''];
    replace(tableSlot, listTable('jobs-table', 'Training jobs', head,
      jobs.map((j) => h('tr', { dataset: { job: j.name, phase: j.phase, foreign: j.foreign ? 'true' : 'false' } },
        h('th', { scope: 'row' }, h('a', { href: routeHref('clusters', cluster, 'jobs', j.name) }, j.name),
          j.foreign ? [' ', foreignBadge()] : null,
          j.mlflow_tracking_arn && (historyPath
            ? [' ', h('a', { class: 'small-text', href: historyHref(j.mlflow_tracking_arn, j.name), title: `Training history on ${j.mlflow_tracking_arn}` }, 'MLflow')]
            : h('span', { class: 'muted small-text', title: j.mlflow_tracking_arn }, ' · MLflow'))),
        h('td', {}, phaseBadge(j.phase)),
        h('td', { class: 'nowrap' }, admissionBadge(j.admission)),
        h('td', {}, words(j.recipe)),
        h('td', {}, RUNTIME_LABELS[j.runtime] || words(j.runtime)),
        h('td', { class: 'counts' }, String(j.replicas ?? '')),
        h('td', {}, podCounts(j.pods)),
        h('td', { class: 'nowrap' }, recoveryMeter(j.recovery)),
        h('td', { class: 'nowrap' }, simTimeEl(j.created_at)),
        h('td', { class: 'actions-cell' }, j.foreign
          ? h('span', { class: 'muted small-text', title: FOREIGN_TITLE }, 'read-only')
          : h('button', {
            type: 'button', class: 'btn small danger-outline', 'aria-label': `Delete job ${j.name}…`,
            onclick: () => deleteJob(j.name),
          }, 'Delete…'))))));
  }

  async function deleteJob(name) {
    const op = await confirmedDelete({ what: 'job', name, detail: DELETE_DETAIL, path: `${base}/${api.seg(name)}`, activity });
    if (op) followOperation(activity, op, { title: `Delete job ${name}`, speed, onSettled: () => load() });
  }

  const history = historyPath ? h('a', { class: 'btn', href: `#${historyPath}`, id: 'training-history-link' }, 'Training history') : null;
  const el = h('section', { class: 'view' },
    workloadHead(cluster, 'jobs', 'Training jobs',
      history,
      h('button', { type: 'button', class: 'btn', onclick: () => { load(); announce('Jobs refreshed'); } }, 'Refresh'),
      h('a', { class: 'btn primary', href: routeHref('clusters', cluster, 'jobs', 'new'), id: 'new-job' }, 'Submit job')),
    h('p', { class: 'lede muted' }, 'HyperPodPyTorchJob restarts a failed process in place, within its recovery budget; a RayJob runs VERL on its own Ray cluster.'),
    errorBox, tableSlot, activity);
  const reload = debounce(load, 300);
  const stream = new api.OperationStream({ onOperation: (op) => { if (onCluster(op, cluster) && /job/.test(op.kind)) reload(); } }).start();
  load();
  return {
    el,
    title: `Training jobs · ${cluster}`,
    dispose() {
      list.dispose();
      reload.cancel();
      stream.stop();
    },
  };
}

// ---- submit form ------------------------------------------------------------------------------

function recipeFields(key) {
  switch (key) {
    case 'torch':
      return [
        formField('recipe.script', 'Training script', { placeholder: 'code/train.py', mono: true, help: 'Path inside the shared bucket.' }),
        formField('recipe.args', 'Script arguments (one per line)', { kind: 'textarea', mono: true, placeholder: '--epochs=3\n--lr=2e-5' }),
      ];
    case 'llama_factory':
      return [
        formField('recipe.config', 'LLaMA-Factory config', { placeholder: 'configs/qwen3_lora_sft.yaml', mono: true, help: 'YAML path inside the shared bucket.' }),
        formField('recipe.overrides', 'Overrides (key=value, one per line)', { kind: 'textarea', mono: true, placeholder: 'num_train_epochs=3\nlearning_rate=1e-4' }),
      ];
    case 'ms_swift':
      return [
        formField('recipe.command', 'Command', { kind: 'select', value: 'sft', options: [['sft', 'sft — supervised fine-tuning'], ['pt', 'pt — pre-training'], ['rlhf', 'rlhf — DPO, GRPO, …']] }),
        formField('recipe.config', 'Config (optional)', { placeholder: 'configs/swift_sft.yaml', mono: true, help: 'Passed as --config; path inside the shared bucket.' }),
        formField('recipe.args', 'Extra arguments (one per line)', { kind: 'textarea', mono: true, placeholder: '--model=/mnt/s3/models/Qwen/Qwen3-0.6B\n--train_type=lora' }),
      ];
    case 'verl':
      return [
        formField('recipe.entry_module', 'Entry module', { value: 'verl.trainer.main_ppo', mono: true }),
        formField('recipe.config', 'Hydra config (optional)', { placeholder: 'configs/ppo.yaml', mono: true }),
        formField('ray_version', 'Ray version of the image', { value: '2.49.0', mono: true }),
        formField('recipe.overrides', 'Hydra overrides (key=value, one per line)', { kind: 'textarea', mono: true, placeholder: 'data.train_files=/mnt/s3/data/gsm8k/train.parquet' }),
      ];
    default:
      return [];
  }
}

const ADMISSION_TONES = { admitted: 'ok', queued: 'warn', preempted: 'bad', finished: 'muted' };

/** A job's place in its team's Kueue queue (task governance): a badge with team/priority, the
 *  reason and Kueue's message as its title; nothing for a job that names no team. */
function admissionBadge(a) {
  if (!a) return h('span', { class: 'muted' }, '—');
  const who = [a.team, a.priority].filter(Boolean).join(' / ');
  return h('span', { class: 'admission', dataset: { admission: a.state }, title: [a.reason, a.message].filter(Boolean).join(': ') },
    badge(a.state, ADMISSION_TONES[a.state]), who ? h('span', { class: 'muted small-text' }, ` ${who}`) : null);
}

/** Environment lines: NAME=value, or NAME=secret:<secret>/<key> for a Secret reference. */
function envList(text) {
  return lines(text).map((l) => {
    const i = l.indexOf('=');
    const name = i < 0 ? l : l.slice(0, i).trim();
    const value = i < 0 ? '' : l.slice(i + 1).trim();
    const m = /^secret:([^/]+)\/(.+)$/.exec(value);
    return m ? { name, secret: { name: m[1], key: m[2] } } : { name, value };
  });
}

/** The request body of the form. */
export function jobBody(recipeKey, v) {
  const recipe = RECIPES.find((r) => r.key === recipeKey);
  const job = prune({
    name: v['job.name'],
    namespace: v['job.namespace'],
    team: v['job.team'],
    priority: v['job.priority'],
    storage: v['job.storage.claim_name'] ? { claim_name: v['job.storage.claim_name'] } : undefined,
    image: v['job.image'],
    instance_type: v['job.instance_type'],
    nodes: num(v['job.nodes']),
    gpus_per_node: num(v['job.gpus_per_node']),
    efa: v['job.efa'],
    service_account: v['job.service_account'],
    env: envList(v['job.env']),
    volumes: v['job.volumes'],
    mlflow: v['job.mlflow.tracking_server_arn'] ? { tracking_server_arn: v['job.mlflow.tracking_server_arn'], experiment: v['job.mlflow.experiment'] } : undefined,
  }) || {};
  job.efa = !!v['job.efa'];
  let rec;
  if (recipeKey === 'torch') rec = { kind: 'torch', script: v['recipe.script'], args: lines(v['recipe.args']) };
  else if (recipeKey === 'llama_factory') rec = { kind: 'llama_factory', config: v['recipe.config'], overrides: pairs(v['recipe.overrides']) };
  else if (recipeKey === 'ms_swift') rec = { kind: 'ms_swift', command: v['recipe.command'], config: v['recipe.config'], args: lines(v['recipe.args']) };
  else rec = { kind: 'verl', entry_module: v['recipe.entry_module'], config: v['recipe.config'], overrides: pairs(v['recipe.overrides']) };
  rec = { kind: rec.kind, ...(prune(rec) || {}) };
  if (recipe.runtime === 'ray') {
    return { runtime: 'ray', job, recipe: rec, ...(prune({ ray_version: v.ray_version }) || {}) };
  }
  const monitor = v['resilience.log_monitors[0].log_pattern']
    ? [prune({
      name: v['resilience.log_monitors[0].name'] || 'progress',
      log_pattern: v['resilience.log_monitors[0].log_pattern'],
      expected_recurring_frequency_seconds: num(v['resilience.log_monitors[0].expected_recurring_frequency_seconds']),
    })]
    : undefined;
  const resilience = prune({
    job_max_retry_count: num(v['resilience.job_max_retry_count']),
    restart_policy: {
      restarts_before_full_job_restart: num(v['resilience.restart_policy.restarts_before_full_job_restart']),
      max_full_job_restarts: num(v['resilience.restart_policy.max_full_job_restarts']),
    },
    log_monitors: monitor,
  });
  return {
    runtime: 'hyperpod', job, recipe: rec, ...(resilience ? { resilience } : {}),
    ...(v.tiered_checkpointing ? { tiered_checkpointing: true } : {}),
  };
}

export function jobNewView({ app, params, query }) {
  const [cluster] = params;
  const speed = app.simSpeed();
  const base = `/api/clusters/${api.seg(cluster)}/jobs`;
  let recipeKey = RECIPES.some((r) => r.key === query.get('recipe')) ? query.get('recipe') : 'torch';

  const recipeSet = h('fieldset', { class: 'recipe-choice', dataset: { field: 'recipe.kind' } },
    h('legend', {}, 'Recipe'),
    h('div', { class: 'recipe-cards' }, RECIPES.map((r) => {
      const rid = id('recipe');
      return h('div', { class: 'check recipe-card' },
        h('input', { type: 'radio', name: 'recipe', id: rid, value: r.key, checked: r.key === recipeKey }),
        h('label', { for: rid }, h('strong', {}, r.label), h('span', { class: 'help' }, r.help)));
    })));
  const recipeSlot = h('div', { class: 'grid-2 recipe-fields' });
  const image = formField('job.image', 'Image', { mono: true, help: 'A pinned tag or digest.' });
  const typeField = formField('job.instance_type', 'Instance type', { kind: 'select' });
  const typeSelect = typeField.querySelector('select');
  const resilienceSet = h('fieldset', { class: 'card inset', dataset: { field: 'resilience' } },
    h('legend', {}, 'Recovery budget (HyperPod training operator)'),
    h('p', { class: 'help' }, 'A failed process restarts in place; after the in-place restarts the whole job restarts; after the full restarts the job fails.'),
    h('div', { class: 'grid-3' },
      formField('resilience.restart_policy.restarts_before_full_job_restart', 'In-place restarts per window', { kind: 'number', value: '3' }),
      formField('resilience.restart_policy.max_full_job_restarts', 'Full job restarts', { kind: 'number', value: '1' }),
      formField('resilience.job_max_retry_count', 'Job retries', { kind: 'number', value: '5' })),
    h('details', { class: 'advanced' }, h('summary', {}, 'Hang detection (log monitor)'),
      h('div', { class: 'grid-3' },
        formField('resilience.log_monitors[0].name', 'Rule name', { value: 'progress', mono: true }),
        formField('resilience.log_monitors[0].log_pattern', 'Log pattern (regex)', { mono: true, placeholder: '.*loss.*' }),
        formField('resilience.log_monitors[0].expected_recurring_frequency_seconds', 'Hung after (seconds without a match)', { kind: 'number', placeholder: '600' }))),
    formField('tiered_checkpointing', 'Checkpoint through managed tiered checkpointing', {
      kind: 'checkbox',
      help: 'The pods run as default/hyperpod-checkpointing (may write checkpoints to the shared bucket and push CloudWatch metrics). Needs the cluster feature on and namespace default.',
    }));
  const rayNote = h('p', { class: 'notice muted', hidden: true }, 'Ray jobs have no process-level recovery budget: a failed RayJob is retried with a fresh Ray cluster.');
  const mlflowArn = formField('job.mlflow.tracking_server_arn', 'MLflow tracking server ARN (optional)', {
    mono: true, placeholder: 'arn:aws:sagemaker:<region>:<account>:mlflow-tracking-server/<name>',
    help: 'SageMaker managed MLflow: the job logs its metrics there (MLFLOW_TRACKING_URI).',
  });
  const arnInput = mlflowArn.querySelector('input');
  const arnList = h('datalist', { id: id('mlflow-servers') });
  arnInput.setAttribute('list', arnList.id);
  mlflowArn.append(arnList);

  const volumes = volumeMounts(cluster, {
    field: 'job.volumes',
    legend: 'FSx for Lustre volumes (optional)',
    help: 'Mounted in every container of every pod, beside the shared bucket; at /fsx/<name> unless a mount path is given. The claim lives in namespace default.',
    readOnlyChoice: true,
  });

  const { form, activity } = planReviewForm({
    app, cluster, kind: 'job', section: 'jobs', base,
    fields: [
      recipeSet,
      h('div', { class: 'grid-3' },
        formField('job.name', 'Job name', { mono: true, placeholder: 'qwen3-sft', help: 'Lowercase letters, digits and -, at most 50 characters.' }),
        formField('job.namespace', 'Namespace', { value: 'default', mono: true }),
        image),
      h('div', { class: 'grid-4' },
        typeField,
        formField('job.nodes', 'Nodes', { kind: 'number', value: '1', help: 'One pod per node.' }),
        formField('job.gpus_per_node', 'GPUs per node (optional)', { kind: 'number', help: 'Every GPU of the instance type when empty.' }),
        formField('job.efa', 'Use EFA interfaces', { kind: 'checkbox', value: true })),
      h('div', { class: 'grid-3' },
        formField('job.team', 'Team (task governance, optional)', { mono: true, help: 'The job waits for its team\'s quota; run it in namespace hyperpod-ns-<team>.' }),
        formField('job.priority', 'Priority class (optional)', { mono: true, help: 'One of the cluster\'s priority classes; needs a team.' }),
        formField('job.storage.claim_name', 'Shared claim (optional)', { mono: true, help: 'A claim of the job\'s namespace; the cluster\'s shared bucket claim when empty (namespace default).' })),
      volumes.el,
      recipeSlot,
      resilienceSet, rayNote,
      h('details', { class: 'advanced' }, h('summary', {}, 'Tracking, identity and environment'),
        h('div', { class: 'grid-2' },
          mlflowArn,
          formField('job.mlflow.experiment', 'MLflow experiment (optional)', { mono: true, help: 'The job name when empty.' }),
          formField('job.service_account', 'Service account (optional)', { mono: true, help: 'With an MLflow server and none given, the job runs as <job>-mlflow, bound to the server\'s writer role (EKS Pod Identity).' }),
          formField('job.env', 'Environment (NAME=value, or NAME=secret:<secret>/<key>)', {
            kind: 'textarea', mono: true, placeholder: 'NCCL_DEBUG=INFO\nWANDB_API_KEY=secret:wandb/api-key',
            help: 'Credentials must come from a Secret: a literal token-like value is refused.',
          }))),
    ],
    body: (f) => jobBody(recipeKey, { ...readForm(f), 'job.volumes': volumes.read() }),
    nameOf: (b) => b.job.name,
    apply: { id: 'job-submit', label: 'Submit job' },
    lede: 'applied with server-side apply, then followed until the job runs',
  });

  function applyRecipe() {
    const r = RECIPES.find((x) => x.key === recipeKey);
    const img = image.querySelector('input');
    if (!img.value || RECIPES.some((x) => x.image === img.value)) img.value = r.image;
    replace(recipeSlot, recipeFields(recipeKey));
    resilienceSet.hidden = r.runtime !== 'hyperpod';
    rayNote.hidden = r.runtime !== 'ray';
  }
  recipeSet.addEventListener('change', (e) => {
    if (e.target.name !== 'recipe') return;
    recipeKey = e.target.value;
    applyRecipe();
  });
  applyRecipe();
  instanceTypeOptions(typeSelect, cluster).catch(() => {});
  loadVolumesInto(cluster, volumes);
  api.list('/api/mlflow/servers').then((servers) => {
    replace(arnList, (servers || []).map((s) => h('option', { value: s.arn }, s.name)));
  }).catch(() => { /* MLflow servers are optional */ });

  const el = h('section', { class: 'view' },
    workloadHead(cluster, 'jobs', 'Submit a training job'),
    form, activity);
  return { el, title: `Submit job · ${cluster}`, focus: form.querySelector('input[name=recipe]:checked') };
}

// ---- live logs ------------------------------------------------------------------------------

/**
 * Follows a job's logs over /api/clusters/{c}/jobs/{j}/logs/stream. Frames are JSON lines
 * {"pod", "line"} and a last {"end": true, "reason"}. A dropped connection reconnects with
 * backoff; the tail sent again on reconnect (the last 5,000 lines) is matched against what is
 * shown, so lines are not doubled, and a gap or lines the server skipped are marked in the log.
 */
/** Lines a reconnect asks for (the server's largest tail). */
const RESUME_TAIL = 5000;

export class LogStream {
  constructor({ cluster, job, pod, tail = 100, onLines, onState }) {
    Object.assign(this, { cluster, job, pod, tail, onLines, onState });
    this.ws = null;
    this.stopped = true;
    this.attempt = 0;
    this.recent = [];
    this.batch = null;
    this.ended = false;
  }

  url() {
    const u = new URL(`/api/clusters/${api.seg(this.cluster)}/jobs/${api.seg(this.job)}/logs/stream`, location.origin);
    u.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
    if (this.pod) u.searchParams.set('pod', this.pod);
    // A reconnect asks for the server's largest tail: what is already shown is cut from it.
    u.searchParams.set('tail', String(this.opened ? RESUME_TAIL : this.tail));
    return u.toString();
  }

  start() {
    this.stopped = false;
    this.ended = false;
    this.connect();
    return this;
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.retry);
    if (this.ws) {
      this.ws.onclose = null;
      this.ws.onmessage = null;
      try {
        this.ws.close(1000, 'done');
      } catch { /* closed */ }
      this.ws = null;
    }
  }

  connect() {
    if (this.stopped) return;
    this.onState(this.attempt ? 'reconnecting' : 'connecting');
    let ws;
    try {
      ws = new WebSocket(this.url());
    } catch {
      this.schedule();
      return;
    }
    this.ws = ws;
    // The tail arrives first, as one frame (the server sends it whole before any live line):
    // that frame is matched against what is already shown, however long it takes to come.
    this.batch = [];
    ws.onopen = () => {
      this.opened = true;
      this.attempt = 0;
      this.onState('live');
    };
    ws.onmessage = (ev) => {
      // A frame is newline-delimited JSON: the lines that were ready when it was sent.
      const lines = [];
      for (const text of String(ev.data).split('\n')) {
        if (!text.trim()) continue;
        let msg;
        try {
          msg = JSON.parse(text);
        } catch {
          continue;
        }
        if (msg.end) {
          if (lines.length) this.emitLines(lines);
          this.flushBatch();
          this.ended = true;
          this.onState('ended', msg.reason);
          return;
        }
        if (typeof msg.line === 'string') lines.push(msg);
        else if (typeof msg.skipped === 'number') {
          if (lines.length) this.emitLines(lines.splice(0));
          this.marker(`the server skipped ${msg.skipped} ${msg.unit || 'frames'} of lines: this view fell behind`);
        }
      }
      if (lines.length) this.emitLines(lines);
      this.flushBatch();
    };
    ws.onclose = () => {
      this.flushBatch();
      if (this.ws === ws) this.ws = null;
      if (this.stopped || this.ended) return;
      this.schedule();
    };
  }

  flushBatch() {
    const batch = this.batch;
    this.batch = null;
    if (!batch || !batch.length) return;
    // The reconnect's tail may start before or after the first line still kept: cut after the
    // batch's line i whose predecessors equal the end of what is shown (as far as both go),
    // the longest such match, among equals the latest (never a line twice). The CLI's client
    // applies the same rule (crates/client/src/logs.rs `resume`).
    const key = (m) => `${m.pod}\u0000${m.line}`;
    const shown = this.recent.map(key);
    const incoming = batch.map(key);
    let best = null;
    if (shown.length) {
      const last = shown[shown.length - 1];
      for (let i = incoming.length - 1; i >= 0; i -= 1) {
        if (incoming[i] !== last) continue;
        const len = Math.min(i + 1, shown.length);
        if (best && best.len >= len) continue;
        let same = true;
        for (let j = 0; j < len && same; j += 1) same = shown[shown.length - 1 - j] === incoming[i - j];
        if (same) best = { len, i };
      }
      if (!best) this.marker('Reconnected: lines written while disconnected may be missing');
    }
    this.emit(batch.slice(best ? best.i + 1 : 0));
  }

  /** A note in the log itself (not a log line: never matched against a reconnect's tail). */
  marker(text) {
    this.onLines([{ pod: '', line: `— ${text} —`, marker: true }]);
  }

  emitLines(msgs) {
    if (this.batch) this.batch.push(...msgs);
    else this.emit(msgs);
  }

  emit(msgs) {
    if (!msgs.length) return;
    this.recent.push(...msgs);
    if (this.recent.length > 1000) this.recent.splice(0, this.recent.length - 1000);
    this.onLines(msgs);
  }

  schedule() {
    this.attempt += 1;
    const delay = Math.min(8000, 300 * 2 ** Math.min(this.attempt - 1, 5));
    this.onState('reconnecting', delay);
    clearTimeout(this.retry);
    this.retry = setTimeout(() => this.connect(), delay);
    if (this.attempt % 3 === 0) api.get('/api/session').catch(() => {});
  }

  reconnectNow() {
    this.stop();
    this.attempt = 0;
    this.start();
  }
}

const MAX_LOG_LINES = 5000;

/** The log panel: pod selector, follow toggle, state, the lines. */
function logPanel(cluster, job) {
  const podSelect = h('select', { id: 'log-pod', 'aria-label': 'Pod' }, h('option', { value: '' }, 'Rank 0 (first pod)'));
  const follow = h('input', { type: 'checkbox', id: 'log-follow', checked: true });
  const state = h('span', { class: 'conn', id: 'log-state', dataset: { state: 'connecting' }, role: 'status' }, 'Connecting…');
  const reconnect = h('button', { type: 'button', class: 'btn small', id: 'log-reconnect', hidden: true }, 'Reconnect');
  const count = h('span', { class: 'muted small-text', id: 'log-count' }, '0 lines');
  const out = h('div', { class: 'log', id: 'job-log', role: 'log', 'aria-label': `Logs of ${job}`, tabindex: '0', 'aria-live': 'off' });
  let total = 0;
  let stream = null;
  let autoScrolling = false;

  const scrollDown = () => {
    autoScrolling = true;
    out.scrollTop = out.scrollHeight;
    requestAnimationFrame(() => { autoScrolling = false; });
  };
  out.addEventListener('scroll', () => {
    if (autoScrolling) return;
    const atBottom = out.scrollHeight - out.scrollTop - out.clientHeight < 8;
    if (follow.checked !== atBottom) {
      follow.checked = atBottom;
      announce(atBottom ? 'Following the log' : 'Log paused: scroll to the bottom or tick Follow to resume');
    }
  });
  follow.addEventListener('change', () => { if (follow.checked) scrollDown(); });

  function onLines(msgs) {
    const multi = podSelect.value === '' && new Set(msgs.map((m) => m.pod)).size > 1;
    const frag = document.createDocumentFragment();
    for (const m of msgs) {
      frag.append(h('div', { class: m.marker ? 'log-line log-marker' : 'log-line', dataset: { pod: m.pod || '' } },
        multi && h('span', { class: 'log-pod' }, `${m.pod} `), m.line));
    }
    out.append(frag);
    total += msgs.length;
    while (out.childElementCount > MAX_LOG_LINES) out.firstElementChild.remove();
    count.textContent = `${total} line${total === 1 ? '' : 's'}${total > MAX_LOG_LINES ? ` (last ${MAX_LOG_LINES} shown)` : ''}`;
    if (follow.checked) scrollDown();
  }

  function onState(s, extra) {
    state.dataset.state = s;
    reconnect.hidden = !(s === 'ended' || s === 'reconnecting');
    state.textContent = {
      connecting: 'Connecting…',
      live: 'Live',
      reconnecting: `Connection lost; reconnecting${extra ? ` in ${Math.round(extra / 100) / 10} s` : '…'}`,
      ended: `Stream ended${extra ? `: ${extra}` : ''}`,
    }[s] || s;
  }

  function open() {
    if (stream) stream.stop();
    replace(out);
    total = 0;
    count.textContent = '0 lines';
    stream = new LogStream({ cluster, job, pod: podSelect.value, onLines, onState }).start();
  }
  podSelect.addEventListener('change', () => {
    announce(`Logs of ${podSelect.value || 'the first pod'}`);
    open();
  });
  reconnect.addEventListener('click', () => open());

  const el = h('section', { class: 'card', 'aria-labelledby': 'logs-title', id: 'logs-card' },
    h('div', { class: 'section-head' }, h('h2', { id: 'logs-title' }, 'Logs'),
      h('div', { class: 'log-tools' },
        h('label', { for: 'log-pod', class: 'visually-hidden' }, 'Pod'), podSelect,
        h('span', { class: 'check' }, follow, h('label', { for: 'log-follow' }, 'Follow')),
        state, reconnect)),
    out, h('p', { class: 'help' }, count, ' · scrolling up pauses following'));
  return {
    el,
    start: open,
    stop() { if (stream) stream.stop(); },
    setPods(pods) {
      const names = pods.map((p) => p.name);
      const have = [...podSelect.options].map((o) => o.value).filter(Boolean);
      if (names.join() === have.join()) return;
      const keep = podSelect.value;
      replace(podSelect, h('option', { value: '' }, 'Rank 0 (first pod)'),
        names.map((n) => h('option', { value: n, selected: n === keep }, n)));
    },
  };
}

// ---- job page -------------------------------------------------------------------------------

function props(pairsList) {
  return h('dl', { class: 'props' }, pairsList.filter(Boolean).map(([k, v]) => [
    h('dt', {}, k), h('dd', {}, v === null || v === undefined || v === '' ? h('span', { class: 'muted' }, '—') : v)]));
}

const JOB_POLL_MS = 2000;
const JOB_POLL_MAX_MS = 10000;

export function jobView({ app, params, query }) {
  const [cluster, job] = params;
  const speed = app.simSpeed();
  const path = `/api/clusters/${api.seg(cluster)}/jobs/${api.seg(job)}`;
  const errorBox = h('div', {});
  const badges = h('span', { class: 'title-badges' });
  const summary = h('div', { 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Reading the job…'));
  const podsSlot = h('div', {});
  const eventsSlot = h('div', {});
  const manifestSlot = h('div', {});
  const activity = h('div', { class: 'activity-slot', id: 'job-activity' });
  const logs = logPanel(cluster, job);
  const metrics = metricsPanel(cluster, { job });
  let disposed = false;
  let timer = null;
  // While the job is active it is re-read every 2 s; each answer equal to the last doubles the
  // wait, up to JOB_POLL_MAX_MS (a running job mostly reads unchanged: docs/benchmarks.md,
  // "UI traffic"); a change, or a delete under way, brings it back to 2 s.
  let delay = JOB_POLL_MS;
  let lastRead = null;
  let deleting = false;
  let gone = false;

  async function load() {
    clearTimeout(timer);
    if (gone) return;
    try {
      const j = await api.get(path);
      if (disposed || gone) return;
      replace(errorBox);
      render(j);
      const read = JSON.stringify(j);
      delay = read === lastRead && !deleting ? Math.min(delay * 2, JOB_POLL_MAX_MS) : JOB_POLL_MS;
      lastRead = read;
      if ((ACTIVE_PHASES.test(j.phase) || deleting) && !document.hidden) timer = setTimeout(load, delay);
    } catch (err) {
      if (err.status === 401 || disposed || gone) return;
      if (err.status === 404 && !summary.dataset.loaded) {
        // Just submitted: the objects may not be applied yet.
        replace(summary, h('p', { class: 'muted' }, 'The job is not on the cluster yet.'));
        if (query.get('op')) timer = setTimeout(load, 1000);
        return;
      }
      replace(errorBox, errorNotice(err, 'job'));
    } finally {
      summary.removeAttribute('aria-busy');
    }
  }

  function render(j) {
    summary.dataset.loaded = 'true';
    replace(badges, phaseBadge(j.phase), j.foreign ? [' ', foreignBadge()] : null);
    // A foreign job is read-only: no delete, and a note saying who manages it.
    deleteButton.hidden = Boolean(j.foreign);
    foreignNote.hidden = !j.foreign;
    replace(summary, h('div', { class: 'grid-2' },
      props([
        ['Runtime', RUNTIME_LABELS[j.runtime] || words(j.runtime)],
        ['Recipe', words(j.recipe)],
        ['Namespace', h('span', { class: 'mono' }, j.namespace)],
        ['Nodes', String(j.replicas ?? '')],
        ['Created', simTimeEl(j.created_at)],
        ['Volumes', mountedVolumes(cluster, j.volumes, 'job-volumes')],
      ]),
      props([
        ['Phase', h('span', { id: 'job-phase', dataset: { phase: j.phase } }, phaseBadge(j.phase))],
        ['Recovery budget', h('span', { id: 'job-recovery' }, recoveryMeter(j.recovery))],
        ['Admission', j.admission && h('span', { id: 'job-admission' }, admissionBadge(j.admission),
          j.admission.message ? h('div', { class: 'small-text muted', id: 'job-admission-message' }, j.admission.message) : null)],
        ['MLflow', j.mlflow_tracking_arn && h('span', {},
          h('span', { class: 'mono break' }, j.mlflow_tracking_arn),
          app.hasRoute && app.hasRoute('/history')
            ? [' ', h('a', { href: historyHref(j.mlflow_tracking_arn, j.name), id: 'job-history-link' }, 'Training history')] : null)],
        ['Reason', j.message || j.reason || null],
      ])));
    const pods = Array.isArray(j.pod_list) ? j.pod_list : Array.isArray(j.pods) ? j.pods : [];
    logs.setPods(pods);
    replace(podsSlot, pods.length
      ? h('div', { class: 'table-wrap' }, h('table', { class: 'table', id: 'pods-table' },
        h('caption', { class: 'visually-hidden' }, 'Pods'),
        h('thead', {}, h('tr', {}, ['Pod', 'Phase', 'Node', 'Restarts'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, pods.map((p) => h('tr', { dataset: { pod: p.name } },
          h('th', { scope: 'row', class: 'mono' }, p.name), h('td', {}, phaseBadge(p.phase)),
          h('td', { class: 'mono' }, p.node || '—'), h('td', { class: 'counts' }, String(p.restarts ?? 0)))))))
      : h('p', { class: 'muted' }, 'No pods yet.'));
    const conditions = Array.isArray(j.conditions) ? j.conditions : [];
    const events = Array.isArray(j.events) ? j.events : [];
    replace(eventsSlot,
      conditions.length ? [h('h3', {}, 'Conditions'), h('ul', { class: 'op-list', id: 'job-conditions' }, conditions.map((c) => h('li', {},
        h('strong', {}, c.type), ' ', badge(String(c.status), c.status === 'True' ? 'ok' : 'muted'),
        c.reason && h('span', { class: 'muted' }, ` ${c.reason}`), c.message && h('span', {}, ` — ${c.message}`))))] : null,
      h('h3', {}, 'Events'),
      events.length ? h('ul', { class: 'op-list', id: 'job-events' }, events.slice(-30).map((e) => h('li', {},
        typeof e === 'string' ? e : [e.type && badge(e.type, e.type === 'Warning' ? 'warn' : 'muted'), ' ',
          h('strong', {}, e.reason || ''), ' ', e.object ? h('span', { class: 'mono muted' }, `${e.object} `) : null, e.message || '',
          e.count > 1 ? h('span', { class: 'muted' }, ` ×${e.count}`) : null, e.last_seen ? [' ', simTimeEl(e.last_seen)] : null])))
        : h('p', { class: 'muted' }, 'No events.'));
    const objects = Array.isArray(j.manifest) ? j.manifest : j.manifest ? [j.manifest] : [];
    if (!manifestSlot.dataset.count || manifestSlot.dataset.count !== String(objects.length)) {
      manifestSlot.dataset.count = String(objects.length);
      replace(manifestSlot, manifestList(objects));
    }
  }

  async function deleteJob() {
    const op = await confirmedDelete({ what: 'job', name: job, detail: DELETE_DETAIL, path, activity });
    if (!op) return;
    deleting = true;
    followOperation(activity, op, {
      title: `Delete job ${job}`,
      speed,
      onSettled: (done) => {
        deleting = false;
        if (done.status === 'succeeded') {
          gone = true;
          clearTimeout(timer);
          logs.stop();
          announce(`Job ${job} deleted`);
          replace(errorBox, h('div', { class: 'notice ok', role: 'status' }, h('strong', {}, 'Deleted. '),
            h('a', { href: routeHref('clusters', cluster, 'jobs') }, 'Back to the training jobs')));
        }
      },
    });
  }

  const deleteButton = h('button', { type: 'button', class: 'btn danger-outline', id: 'delete-job', onclick: deleteJob }, 'Delete…');
  const foreignNote = h('p', { class: 'notice', id: 'foreign-note', role: 'note', hidden: true }, FOREIGN_TITLE);
  const el = h('section', { class: 'view' },
    workloadHead(cluster, 'jobs', job,
      h('button', { type: 'button', class: 'btn', onclick: () => { load(); announce('Job refreshed'); } }, 'Refresh'),
      deleteButton),
    h('div', { class: 'title-line' }, badges),
    foreignNote, errorBox, activity,
    h('section', { class: 'card', 'aria-labelledby': 'job-sum-title' }, h('h2', { id: 'job-sum-title' }, 'Job'), summary),
    h('section', { class: 'card', 'aria-labelledby': 'metrics-title', id: 'job-metrics' },
      h('h2', { id: 'metrics-title' }, 'GPU use and throughput'),
      h('p', { class: 'help' }, 'The mean GPU utilization and memory over the job’s GPUs (DCGM) and the throughput and loss its log reports, refreshed while this page is open.'),
      metrics.el),
    logs.el,
    h('section', { class: 'card', 'aria-labelledby': 'pods-title' }, h('h2', { id: 'pods-title' }, 'Pods'), podsSlot),
    h('section', { class: 'card', 'aria-labelledby': 'ev-title' }, h('h2', { id: 'ev-title' }, 'Conditions and events'), eventsSlot),
    h('section', { class: 'card', 'aria-labelledby': 'man-title' }, h('h2', { id: 'man-title' }, 'Applied manifests'), manifestSlot));

  const opId = query.get('op');
  if (opId) {
    followOperation(activity, { id: opId }, { title: `Submit job ${job}`, speed, onSettled: () => load() });
  }
  load();
  logs.start();
  metrics.start();
  return {
    el,
    title: `${job} · ${cluster}`,
    dispose() {
      disposed = true;
      clearTimeout(timer);
      logs.stop();
      metrics.stop();
    },
  };
}


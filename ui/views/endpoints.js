// Inference endpoints of a cluster: the list (ready, replicas, URL, pool, router, autoscaling),
// the deploy form (self-managed vLLM / SGLang / custom container as a Deployment, or managed
// by the HyperPod inference operator; instance type and GPUs; the cluster's FSx for Lustre
// volumes mounted read-only, the model read from the bucket or one of them; exposure inside
// the cluster, through a load balancer or as a model pool; SGLang router; KEDA min/max/cooldown) with the
// rendered manifests reviewed first, the endpoint page (scale, or turn autoscaling off, with
// the server's diff first, a chat box that calls the model through the control plane and
// shows the answer and its latency, delete with a typed confirmation) and the model pools,
// where a warm worker is moved between services by a label change (the diff first, then the
// operation).

import { h, replace, routeHref, simTimeEl, words, announce, debounce, id, errorNotice } from '../lib/dom.js';
import * as api from '../lib/api.js';
import { badge } from '../components/status-badge.js';
import { showFindings, clearFindings, formField, readForm, num, lines, prune } from '../lib/forms.js';
import { followOperation, refusal, diffList, planLines } from '../components/plan.js';
import { workloadHead, instanceTypeOptions, manifestList, mountedVolumes, stepsList, confirmedDelete, onCluster, phaseBadge, planReviewForm, emptyList, listTable, foreignBadge, FOREIGN_TITLE } from '../components/workload-page.js';
import { listPoller } from '../lib/polling.js';
import { volumeMounts, volumeChoice, loadVolumesInto } from '../components/volume-picker.js';

export const ENGINES = [
  { key: 'vllm', label: 'vLLM', image: 'vllm/vllm-openai:v0.10.1', port: 8000 },
  { key: 'sglang', label: 'SGLang', image: 'lmsysorg/sglang:v0.5.2-cu126', port: 30000 },
  { key: 'custom', label: 'Custom container', image: '', port: 8080 },
];

const EXPOSURES = {
  cluster_ip: 'Internal',
  load_balancer: 'Load balancer',
  pool: 'Model pool',
  model_pool: 'Model pool',
  managed: 'Managed (operator)',
};

/** The server's answer means "already in this state": 200 no_change, or a dry run whose plan changes nothing. */
/** What deleting an endpoint does, in its confirmation. */
const DELETE_DETAIL = 'Its Deployment, Service, router and autoscaler are deleted; nothing of it is left on the cluster. The model stays in the bucket.';

function noChange(status, data) {
  if (!data) return false;
  if (status === 200 && data.no_change) return true;
  return !!(data.dry_run && data.plan && Array.isArray(data.plan.changes) && !data.plan.changes.length);
}

function readyBadge(e) {
  if (e.ready) return badge('ready', 'ok');
  return badge(e.replicas && e.replicas.ready > 0 ? 'partly ready' : 'not ready', 'busy', '◔');
}

function exposureText(e) {
  const x = e.exposure;
  if (!x) return '—';
  const type = typeof x === 'string' ? x : x.type;
  return EXPOSURES[type] || words(type);
}

function autoscalingText(a) {
  if (!a) return h('span', { class: 'muted' }, 'no autoscaling');
  return h('span', { class: 'nowrap' }, `KEDA ${a.min}–${a.max}`, a.cooldown_seconds !== undefined && a.cooldown_seconds !== null
    ? h('span', { class: 'muted' }, ` · cooldown ${a.cooldown_seconds} s`) : null);
}

// ---- list + pools -----------------------------------------------------------------------------

export function endpointsView({ app, params }) {
  const [cluster] = params;
  const speed = app.simSpeed();
  const base = `/api/clusters/${api.seg(cluster)}`;
  const errorBox = h('div', {});
  const tableSlot = h('div', { 'aria-live': 'polite', 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Reading the endpoints…'));
  const activity = h('div', { class: 'activity-slot', id: 'endpoints-activity' });
  const pools = poolsSection({ cluster, speed, base });
  const list = listPoller({
    url: `${base}/endpoints`, errorBox, tableSlot,
    render: (eps) => {
      render(eps);
      pools.setEndpoints(eps);
    },
    busy: (eps) => eps.some((e) => !e.ready),
  });
  const load = list.load;

  function render(eps) {
    if (!eps.length) {
      replace(tableSlot, emptyList('No endpoints yet',
        'Serve a model from the shared bucket with vLLM or SGLang, or hand it to the HyperPod inference operator.',
        routeHref('clusters', cluster, 'endpoints', 'new'), 'Deploy an endpoint'));
      return;
    }
    const head = ['Endpoint', 'Ready', 'Replicas', 'Engine / model', 'URL', 'Exposure', 'Pool', 'Router · autoscaling', ''];
    replace(tableSlot, listTable('endpoints-table', 'Endpoints', head,
      eps.map((e) => h('tr', { dataset: { endpoint: e.name, ready: String(!!e.ready), foreign: e.foreign ? 'true' : 'false' } },
        h('th', { scope: 'row' }, h('a', { href: routeHref('clusters', cluster, 'endpoints', e.name) }, e.name),
          e.foreign ? [' ', foreignBadge()] : null),
        h('td', {}, readyBadge(e)),
        h('td', { class: 'counts' }, e.replicas ? `${e.replicas.ready} / ${e.replicas.desired}` : '—'),
        h('td', {}, words(e.engine), h('span', { class: 'muted small-text' }, ` · ${words(e.route)}`),
          e.model && h('div', { class: 'mono small-text muted clamp', title: e.model }, e.model)),
        h('td', { class: 'mono small-text url-cell', title: e.url || null }, e.url || h('span', { class: 'muted' }, '—')),
        h('td', {}, exposureText(e)),
        h('td', { class: 'mono' }, e.pool || h('span', { class: 'muted' }, '—')),
        h('td', {}, e.router ? 'router' : h('span', { class: 'muted' }, 'no router'), h('br'), autoscalingText(e.autoscaling)),
        h('td', { class: 'actions-cell nowrap' }, e.foreign
          ? h('span', { class: 'muted small-text', title: FOREIGN_TITLE }, 'read-only')
          : h('button', {
            type: 'button', class: 'btn small danger-outline', 'aria-label': `Delete endpoint ${e.name}…`,
            onclick: () => deleteEndpoint(e.name),
          }, 'Delete…'))))));
  }

  async function deleteEndpoint(name) {
    const op = await confirmedDelete({ what: 'endpoint', name, detail: DELETE_DETAIL, path: `${base}/endpoints/${api.seg(name)}`, activity });
    if (op) followOperation(activity, op, { title: `Delete endpoint ${name}`, speed, onSettled: () => { load(); pools.load(); } });
  }

  const el = h('section', { class: 'view' },
    workloadHead(cluster, 'endpoints', 'Endpoints',
      h('button', { type: 'button', class: 'btn', onclick: () => { load(); pools.load(); announce('Endpoints refreshed'); } }, 'Refresh'),
      h('a', { class: 'btn primary', href: routeHref('clusters', cluster, 'endpoints', 'new'), id: 'new-endpoint' }, 'Deploy endpoint')),
    h('p', { class: 'lede muted' }, 'Models served from the shared bucket. Calls from here go through the control plane to the cluster; clients call the URL directly.'),
    errorBox, tableSlot, activity, pools.el);
  const reload = debounce(() => { load(); pools.load(); }, 300);
  const stream = new api.OperationStream({
    onOperation: (op) => { if (onCluster(op, cluster) && /endpoint|pool/.test(op.kind)) reload(); },
  }).start();
  load();
  pools.load();
  return {
    el,
    title: `Endpoints · ${cluster}`,
    dispose() {
      list.dispose();
      reload.cancel();
      stream.stop();
    },
  };
}

/** Model pools: warm workers, each serving one endpoint (or idle); move one with its diff first. */
function poolsSection({ cluster, speed, base }) {
  const slot = h('div', {}, h('p', { class: 'muted' }, 'Reading the model pools…'));
  const activity = h('div', { class: 'activity-slot', id: 'pools-activity' });
  let endpoints = [];
  let current = [];
  const el = h('section', { class: 'card', 'aria-labelledby': 'pools-title', id: 'pools-card' },
    h('h2', { id: 'pools-title' }, 'Model pools'),
    h('p', { class: 'help' }, 'A pool keeps GPU workers warm. Moving a worker to another service changes one label: the pod is not restarted.'),
    slot, activity);

  async function load() {
    try {
      current = await api.list(`${base}/pools`);
      render();
    } catch (err) {
      if (err.status === 401) return;
      replace(slot, errorNotice(err, 'cluster'));
    }
  }

  function render() {
    if (!current.length) {
      replace(slot, h('p', { class: 'muted' }, 'No model pools. Deploy an endpoint with the “Model pool” exposure to start one.'));
      return;
    }
    // A worker can serve any endpoint that serves from a pool (its Service selects the label).
    const poolEndpoints = endpoints.filter((e) => e.pool).map((e) => e.name);
    replace(slot, current.map((p) => {
      const inPool = poolEndpoints;
      return h('div', { class: 'pool', dataset: { pool: p.pool } },
        h('h3', {}, 'Pool ', h('span', { class: 'mono' }, p.pool)),
        p.workers.length ? h('div', { class: 'table-wrap' }, h('table', { class: 'table pool-table' },
          h('caption', { class: 'visually-hidden' }, `Workers of pool ${p.pool}`),
          h('thead', {}, h('tr', {}, ['Worker pod', 'Runs in', 'Node', 'Serving', ''].map((t) => h('th', { scope: 'col' }, t || h('span', { class: 'visually-hidden' }, 'Actions'))))),
          h('tbody', {}, p.workers.map((w) => {
            const sel = h('select', { id: id('serving'), 'aria-label': `Service of worker ${w.pod}`, dataset: { field: 'serving' } },
              h('option', { value: '', selected: !w.serving }, 'idle (no service)'),
              [...new Set([...inPool, ...(w.serving ? [w.serving] : [])])].map((n) => h('option', { value: n, selected: n === w.serving }, n)));
            const move = h('button', { type: 'button', class: 'btn small', dataset: { action: 'move' } }, 'Move…');
            move.addEventListener('click', () => review(p.pool, w, sel.value || null, move));
            return h('tr', { dataset: { worker: w.pod, serving: w.serving || '' } },
              h('th', { scope: 'row', class: 'mono' }, w.pod, w.ready === false ? [' ', badge('not ready', 'busy', '◔')] : null),
              h('td', { class: 'mono' }, w.endpoint || '—'),
              h('td', { class: 'mono' }, w.node || '—'),
              h('td', {}, sel),
              h('td', { class: 'actions-cell' }, move));
          }))))
          : h('p', { class: 'muted' }, 'No workers in this pool.'));
    }));
  }

  async function review(pool, worker, serving, opener) {
    const url = `${base}/pools/${api.seg(pool)}/workers/${api.seg(worker.pod)}`;
    const body = { serving };
    const heading = h('h3', { tabindex: '-1' }, `Move ${worker.pod}`);
    const close = () => { replace(activity); if (opener.isConnected) opener.focus(); };
    const frame = (...children) => {
      replace(activity, h('div', { class: 'editor card inset', dataset: { editor: 'pool-move' } },
        h('div', { class: 'activity-head' }, heading, h('button', { type: 'button', class: 'btn small ghost', onclick: close }, 'Close')),
        children));
      heading.focus();
    };
    try {
      const { status, data } = await api.put(url, body, { query: { dry_run: true } });
      if (noChange(status, data)) {
        frame(h('p', { class: 'notice ok no-change', role: 'status' }, h('strong', {}, 'Already in this state. '),
          `${worker.pod} already serves ${serving || 'nothing'}; nothing to do.`));
        return;
      }
      const changes = planLines(data.plan, { serving: 'Serving', [`labels.instantstart.io/serving`]: 'Serving label' });
      const key = api.newIdempotencyKey();
      const apply = h('button', { type: 'button', class: 'btn primary', id: 'pool-apply' }, 'Apply');
      frame(
        changes.length ? diffList(changes) : diffList([{ field: 'serving', label: 'Serving', from: worker.serving || 'idle', to: serving || 'idle' }]),
        h('p', { class: 'help' }, 'One label on the pod changes; the worker keeps running and its model stays loaded.'),
        dry(data),
        h('div', { class: 'actions tight' }, apply));
      apply.addEventListener('click', async () => {
        apply.disabled = true;
        try {
          const { status: st, data: d } = await api.put(url, body, { idempotencyKey: key });
          if (st === 200 && d && d.no_change) {
            frame(h('p', { class: 'notice ok no-change', role: 'status' }, h('strong', {}, 'Already in this state.')));
            return;
          }
          followOperation(activity, d.operation, { title: `Move ${worker.pod} to ${serving || 'idle'}`, speed, onSettled: () => load() });
        } catch (err) {
          apply.disabled = false;
          if (err.status !== 401) activity.append(refusal(err));
        }
      });
    } catch (err) {
      if (err.status === 401) return;
      frame(refusal(err));
    }
  }

  function dry(data) {
    return data && data.steps ? h('details', { class: 'json' }, h('summary', {}, 'Steps'), stepsList(data.steps)) : null;
  }

  return {
    el,
    load,
    setEndpoints(eps) {
      endpoints = eps;
      if (current.length && !el.contains(document.activeElement)) render();
    },
  };
}

// ---- deploy form ------------------------------------------------------------------------------

export function endpointBody(route, v) {
  const common = { name: v.name, namespace: v.namespace, instance_type: v.instance_type, replicas: num(v.replicas) };
  if (route === 'managed') {
    return {
      route: 'managed',
      ...prune({
        ...common,
        model_name: v.model_name,
        model_source: {
          bucket: v['model_source.bucket'], region: v['model_source.region'], model_location: v['model_source.model_location'],
        },
        worker: { image: v['worker.image'], args: lines(v['worker.args']), port: num(v['worker.port']), gpus: num(v['worker.gpus']) },
        routing: v.routing,
      }),
      ...(v.kv_cache ? { kv_cache: { l1: true, l2: { backend: 'tiered_storage' } } } : {}),
      metrics: !!v.metrics,
    };
  }
  const engineKey = v['engine.kind'];
  const engine = engineKey === 'custom'
    ? { kind: 'custom', ...(prune({ command: lines(v['engine.command']), args: lines(v['engine.args']), health_path: v['engine.health_path'] }) || {}) }
    : {
      kind: engineKey,
      ...(prune({
        model: v['engine.model'], served_model_name: v['engine.served_model_name'], max_model_len: num(v['engine.max_model_len']),
        tensor_parallel_size: num(v['engine.tensor_parallel_size']), extra_args: lines(v['engine.extra_args']),
      }) || {}),
    };
  const exposureKind = v['exposure.type'];
  const exposure = exposureKind === 'load_balancer'
    ? { type: 'load_balancer', internet_facing: !!v['exposure.internet_facing'], ...(prune({ source_ranges: lines(v['exposure.source_ranges']) }) || {}) }
    : { type: 'cluster_ip' };
  const body = {
    route: 'self_managed',
    ...prune({
      ...common, engine, image: v.image, gpus: num(v.gpus), port: num(v.port), pool: exposureKind === 'pool' ? v.pool : undefined,
      volumes: v.volumes, model_volume: engineKey === 'custom' ? undefined : v.model_volume,
    }),
    exposure,
    router: !!v.router,
  };
  if (v['autoscaling.enabled']) {
    body.autoscaling = prune({
      min_replicas: num(v['autoscaling.min_replicas']),
      max_replicas: num(v['autoscaling.max_replicas']),
      cooldown_seconds: num(v['autoscaling.cooldown_seconds']),
    }) || {};
  }
  return body;
}

function radioSet(name, legend, options, checked, field) {
  return h('fieldset', { class: 'radios inline-radios', dataset: { field } }, h('legend', {}, legend),
    options.map(([value, text, help]) => {
      const rid = id(name);
      return h('div', { class: 'check' },
        h('input', { type: 'radio', name, id: rid, value, checked: value === checked }),
        h('label', { for: rid }, text, help && h('span', { class: 'help' }, ` — ${help}`)));
    }));
}

export function endpointNewView({ app, params, query }) {
  const [cluster] = params;
  const base = `/api/clusters/${api.seg(cluster)}/endpoints`;
  let route = query.get('route') === 'managed' ? 'managed' : 'self_managed';

  const routeSet = radioSet('route', 'How it is run', [
    ['self_managed', 'Self-managed', 'a Deployment and a Service InstantStart writes (vLLM, SGLang or any container)'],
    ['managed', 'Managed', 'handed to the HyperPod inference operator (tiered KV cache, intelligent routing)'],
  ], route, 'route');
  const typeField = formField('instance_type', 'Instance type', { kind: 'select' });
  const common = h('div', { class: 'grid-4' },
    formField('name', 'Endpoint name', { mono: true, placeholder: 'qwen3', help: 'Lowercase letters, digits and -.' }),
    formField('namespace', 'Namespace', { value: 'default', mono: true }),
    typeField,
    formField('replicas', 'Replicas', { kind: 'number', value: '1' }));

  // Self-managed.
  const engineSel = formField('engine.kind', 'Engine', { kind: 'select', value: 'vllm', options: ENGINES.map((e) => [e.key, e.label]) });
  const imageField = formField('image', 'Image', { mono: true, value: ENGINES[0].image, help: 'A pinned tag or digest.' });
  const portField = formField('port', 'Port', { kind: 'number', value: String(ENGINES[0].port) });
  const volumes = volumeMounts(cluster, {
    field: 'volumes',
    legend: 'FSx for Lustre volumes (optional)',
    help: 'Mounted read-only in every replica, at /fsx/<name> unless a mount path is given.',
  });
  const modelField = formField('engine.model', 'Model in the bucket', { mono: true, placeholder: 'models/Qwen/Qwen3-0.6B', help: 'A folder of the shared bucket (a download’s destination).' });
  const modelVolume = volumeChoice(cluster, {
    field: 'model_volume',
    label: 'Model from',
    none: 'The shared bucket',
    help: 'The model is a path in that volume, which is then mounted (ticked below).',
    empty: null,
    onChange: (name) => {
      modelField.querySelector('label').textContent = name ? `Model in volume ${name}` : 'Model in the bucket';
      modelField.querySelector('.help').textContent = name ? 'A folder of that volume (a download’s path in it).' : 'A folder of the shared bucket (a download’s destination).';
      if (name) volumes.tick(name);
    },
  });
  const modelFields = h('div', { class: 'grid-4' },
    modelVolume.el,
    modelField,
    formField('engine.served_model_name', 'Served model name (optional)', { mono: true, help: 'What clients send as model; the endpoint name when empty.' }),
    formField('engine.max_model_len', 'Max context length (optional)', { kind: 'number' }),
    formField('engine.tensor_parallel_size', 'Tensor parallel (optional)', { kind: 'number', help: 'Every GPU of the replica when empty.' }),
    h('div', { class: 'span-2' }, formField('engine.extra_args', 'Extra engine arguments (one per line)', { kind: 'textarea', mono: true })));
  const customFields = h('div', { class: 'grid-3', hidden: true },
    formField('engine.command', 'Command (one argv element per line)', { kind: 'textarea', mono: true }),
    formField('engine.args', 'Arguments (one per line)', { kind: 'textarea', mono: true }),
    formField('engine.health_path', 'Health path (optional)', { mono: true, placeholder: '/health', help: 'TCP probes when empty.' }));
  const exposureSet = radioSet('exposure', 'Exposure', [
    ['cluster_ip', 'Inside the cluster', 'a ClusterIP Service'],
    ['load_balancer', 'Load balancer', 'an NLB through the AWS Load Balancer Controller'],
    ['pool', 'Model pool', 'warm workers that can be moved between services'],
  ], 'cluster_ip', 'exposure');
  const lbFields = h('div', { class: 'grid-2', hidden: true },
    formField('exposure.internet_facing', 'Internet-facing (otherwise reachable from the VPC only)', { kind: 'checkbox' }),
    formField('exposure.source_ranges', 'Allowed client CIDRs (one per line)', { kind: 'textarea', mono: true, placeholder: '203.0.113.0/24', help: 'Required when internet-facing: model servers have no authentication of their own.' }));
  const poolFields = h('div', { class: 'grid-3', hidden: true },
    formField('pool', 'Pool name', { mono: true, placeholder: 'gpu-pool' }));
  const routerField = formField('router', 'SGLang router in front of the replicas (cache-aware routing)', { kind: 'checkbox' });
  const autoToggle = formField('autoscaling.enabled', 'Autoscale with KEDA', { kind: 'checkbox', help: 'A ScaledObject on the serving metric scales the Deployment between min and max.' });
  const autoFields = h('div', { class: 'grid-3', hidden: true, dataset: { field: 'autoscaling' } },
    formField('autoscaling.min_replicas', 'Min replicas', { kind: 'number', value: '1' }),
    formField('autoscaling.max_replicas', 'Max replicas', { kind: 'number', value: '4' }),
    formField('autoscaling.cooldown_seconds', 'Cooldown (seconds)', { kind: 'number', value: '300' }));
  const selfManaged = h('div', { class: 'route-fields', dataset: { route: 'self_managed' } },
    h('div', { class: 'grid-4' }, engineSel, imageField, formField('gpus', 'GPUs per replica (optional)', { kind: 'number', help: 'Every GPU of the instance type when empty.' }), portField),
    modelFields, customFields,
    volumes.el,
    exposureSet, lbFields, poolFields,
    routerField,
    autoToggle, autoFields);

  // Managed.
  const managed = h('div', { class: 'route-fields', dataset: { route: 'managed' }, hidden: true },
    h('div', { class: 'grid-3' },
      formField('model_source.bucket', 'Model bucket', { mono: true, help: 'The shared bucket of the cluster by default.' }),
      formField('model_source.region', 'Bucket region', { mono: true }),
      formField('model_source.model_location', 'Model prefix', { mono: true, placeholder: 'models/Qwen/Qwen3-0.6B' })),
    h('div', { class: 'grid-4' },
      formField('worker.image', 'Worker image', { mono: true, value: ENGINES[0].image }),
      formField('worker.port', 'Worker port', { kind: 'number', value: '8080' }),
      formField('worker.gpus', 'GPUs per replica (optional)', { kind: 'number' }),
      formField('model_name', 'Model name (optional)', { mono: true })),
    formField('worker.args', 'Worker arguments (one per line; the model is at /opt/ml/model)', { kind: 'textarea', mono: true, value: '--model=/opt/ml/model\n--port=8080' }),
    h('div', { class: 'grid-3' },
      formField('routing', 'Intelligent routing', { kind: 'select', value: '', options: [['', 'none'], ['prefix_aware', 'Prefix-aware'], ['kv_aware', 'KV-aware (needs the KV cache)'], ['session', 'Session'], ['round_robin', 'Round robin']] }),
      formField('kv_cache', 'Managed tiered KV cache (memory + tiered storage)', { kind: 'checkbox' }),
      formField('metrics', 'Publish model metrics', { kind: 'checkbox', value: true })));

  const { form, activity } = planReviewForm({
    app, cluster, kind: 'endpoint', section: 'endpoints', base,
    fields: [routeSet, common, selfManaged, managed],
    body: (f) => endpointBody(route, { ...readForm(f), 'exposure.type': val('exposure'), volumes: volumes.read(), model_volume: modelVolume.value() }),
    nameOf: (b) => b.name,
    apply: { id: 'endpoint-deploy', label: 'Deploy' },
    lede: 'applied, then followed until the endpoint is ready',
  });

  const val = (name) => form.querySelector(`[name="${name}"]:checked`)?.value;
  function sync() {
    route = val('route');
    selfManaged.hidden = route !== 'self_managed';
    managed.hidden = route !== 'managed';
    const engine = engineSel.querySelector('select').value;
    modelFields.hidden = engine === 'custom';
    customFields.hidden = engine !== 'custom';
    routerField.hidden = engine !== 'sglang';
    const exp = val('exposure');
    lbFields.hidden = exp !== 'load_balancer';
    poolFields.hidden = exp !== 'pool';
    autoFields.hidden = !autoToggle.querySelector('input').checked;
  }
  engineSel.querySelector('select').addEventListener('change', (e) => {
    const eng = ENGINES.find((x) => x.key === e.target.value);
    const img = imageField.querySelector('input');
    if (!img.value || ENGINES.some((x) => x.image === img.value)) img.value = eng.image;
    const port = portField.querySelector('input');
    if (!port.value || ENGINES.some((x) => String(x.port) === port.value)) port.value = String(eng.port);
  });
  form.addEventListener('change', sync);
  sync();
  instanceTypeOptions(typeField.querySelector('select'), cluster).catch(() => {});
  loadVolumesInto(cluster, volumes, modelVolume);
  api.get(`/api/clusters/${api.seg(cluster)}`).then((c) => {
    const b = form.querySelector('[name="model_source.bucket"]');
    const r = form.querySelector('[name="model_source.region"]');
    if (b && !b.value && c.bucket) b.value = c.bucket;
    if (r && !r.value && c.region) r.value = c.region;
  }).catch(() => {});

  const el = h('section', { class: 'view' }, workloadHead(cluster, 'endpoints', 'Deploy an endpoint'), form, activity);
  return { el, title: `Deploy endpoint · ${cluster}`, focus: form.querySelector('input[name=route]:checked') };
}

// ---- endpoint page: scale, chat, delete -------------------------------------------------------

function props(list) {
  return h('dl', { class: 'props' }, list.filter(Boolean).map(([k, v]) => [
    h('dt', {}, k), h('dd', {}, v === null || v === undefined || v === '' ? h('span', { class: 'muted' }, '—') : v)]));
}

/** The answer text of an OpenAI chat-completions response. */
export function answerText(resp) {
  const c = resp && Array.isArray(resp.choices) ? resp.choices[0] : null;
  if (c && c.message && typeof c.message.content === 'string') return c.message.content;
  if (c && typeof c.text === 'string') return c.text;
  return JSON.stringify(resp);
}

function chatBox({ path, model }) {
  const transcript = h('ol', { class: 'chat-log', id: 'chat-log', 'aria-live': 'polite' });
  const message = h('textarea', { id: 'chat-message', rows: 3, placeholder: 'Ask the model something…', dataset: { field: 'messages' } });
  const system = h('input', { id: 'chat-system', autocomplete: 'off', placeholder: 'optional', dataset: { field: 'system' } });
  const maxTokens = h('input', { id: 'chat-max-tokens', value: '256', inputmode: 'numeric', dataset: { field: 'max_tokens' } });
  const temperature = h('input', { id: 'chat-temperature', value: '0.7', inputmode: 'decimal', dataset: { field: 'temperature' } });
  const send = h('button', { type: 'submit', class: 'btn primary', id: 'chat-send' }, 'Send');
  const clear = h('button', { type: 'button', class: 'btn ghost' }, 'Clear');
  const history = [];
  const form = h('form', { class: 'chat-form', id: 'chat-form', novalidate: true },
    h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' }),
    h('div', { class: 'field' }, h('label', { for: message.id }, 'Message'), message),
    h('div', { class: 'grid-3' },
      h('div', { class: 'field' }, h('label', { for: system.id }, 'System prompt'), system),
      h('div', { class: 'field' }, h('label', { for: maxTokens.id }, 'Max tokens'), maxTokens),
      h('div', { class: 'field' }, h('label', { for: temperature.id }, 'Temperature'), temperature)),
    h('div', { class: 'actions tight' }, send, clear,
      h('span', { class: 'help' }, 'Sent through the control plane (60 s timeout, 1 MiB request).')));
  message.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  clear.addEventListener('click', () => {
    history.length = 0;
    replace(transcript);
    message.focus();
  });
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearFindings(form);
    const text = message.value.trim();
    if (!text) {
      showFindings(form, new api.ApiError(400, { findings: [{ field: 'messages', rule: 'type a message first' }] }), { compact: true });
      return;
    }
    const userMsg = { role: 'user', content: text };
    const messages = [...(system.value.trim() ? [{ role: 'system', content: system.value.trim() }] : []), ...history, userMsg];
    const body = { messages, max_tokens: num(maxTokens.value), temperature: num(temperature.value) };
    if (model()) body.model = model();
    const pending = h('li', { class: 'chat-turn pending' }, h('span', { class: 'muted' }, 'Waiting for the model…'));
    transcript.append(h('li', { class: 'chat-turn user' }, h('span', { class: 'chat-role' }, 'You'), h('div', { class: 'chat-text' }, text)), pending);
    send.disabled = true;
    send.setAttribute('aria-busy', 'true');
    const started = performance.now();
    try {
      const { data } = await api.post(`${path}/chat`, body);
      const ms = performance.now() - started;
      const answer = answerText(data);
      history.push(userMsg, { role: 'assistant', content: answer });
      const usage = data && data.usage;
      pending.replaceWith(h('li', { class: 'chat-turn assistant', dataset: { latencyMs: String(Math.round(ms)) } },
        h('span', { class: 'chat-role' }, data.model || 'Model'),
        h('div', { class: 'chat-text chat-answer' }, answer),
        h('p', { class: 'help chat-meta' }, h('span', { class: 'chat-latency' }, `${Math.round(ms)} ms`),
          usage ? ` · ${usage.prompt_tokens ?? '?'} prompt + ${usage.completion_tokens ?? '?'} completion tokens` : '')));
      announce(`Answer in ${Math.round(ms)} milliseconds`);
      message.value = '';
    } catch (err) {
      pending.remove();
      transcript.lastElementChild?.remove();
      if (err.status === 401) return;
      if (err.findings.length) showFindings(form, err, { compact: true });
      else {
        transcript.append(h('li', { class: 'chat-turn error' }, refusal(err)));
      }
    } finally {
      send.disabled = false;
      send.removeAttribute('aria-busy');
      message.focus();
    }
  });
  return h('section', { class: 'card', 'aria-labelledby': 'chat-title', id: 'chat-card' },
    h('h2', { id: 'chat-title' }, 'Chat'), transcript, form);
}

export function endpointView({ app, params, query }) {
  const [cluster, name] = params;
  const speed = app.simSpeed();
  const path = `/api/clusters/${api.seg(cluster)}/endpoints/${api.seg(name)}`;
  const errorBox = h('div', {});
  const badges = h('span', { class: 'title-badges' });
  const summary = h('div', { 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Reading the endpoint…'));
  const podsSlot = h('div', {});
  const manifestSlot = h('div', {});
  const activity = h('div', { class: 'activity-slot', id: 'endpoint-activity' });
  const scaleSlot = h('div', {});
  let ep = null;
  let disposed = false;
  let timer = null;
  let busy = false;
  let gone = false;

  async function load() {
    clearTimeout(timer);
    if (gone) return;
    try {
      const e = await api.get(path);
      if (disposed || gone) return;
      ep = e;
      replace(errorBox);
      render(e);
      // Autoscaled replicas change on their own (KEDA): keep reading them, more slowly.
      if (!document.hidden && (!e.ready || busy || e.autoscaling)) timer = setTimeout(load, !e.ready || busy ? 1500 : 3000);
    } catch (err) {
      if (err.status === 401 || disposed || gone) return;
      if (err.status === 404 && !ep) {
        replace(summary, h('p', { class: 'muted' }, 'The endpoint is not on the cluster yet.'));
        if (query.get('op') || busy) timer = setTimeout(load, 1000);
        return;
      }
      replace(errorBox, errorNotice(err, 'endpoint'));
    } finally {
      summary.removeAttribute('aria-busy');
    }
  }

  function render(e) {
    replace(badges, readyBadge(e), e.foreign ? [' ', foreignBadge()] : null);
    // A foreign endpoint is read-only: no delete, no scale form, a note saying who manages it.
    deleteButton.hidden = Boolean(e.foreign);
    scaleCard.hidden = Boolean(e.foreign);
    foreignNote.hidden = !e.foreign;
    replace(summary, h('div', { class: 'grid-2' },
      props([
        ['Ready', h('span', { id: 'endpoint-ready', dataset: { ready: String(!!e.ready) } }, readyBadge(e))],
        ['Replicas', h('span', { class: 'counts', id: 'endpoint-replicas', dataset: { desired: String(e.replicas?.desired ?? ''), ready: String(e.replicas?.ready ?? '') } },
          e.replicas ? `${e.replicas.ready} ready / ${e.replicas.desired} desired` : '—')],
        ['Route', words(e.route)],
        ['Engine', words(e.engine)],
        ['Model', e.model && h('span', { class: 'mono break' }, e.model)],
        ['Volumes', mountedVolumes(cluster, e.volumes, 'endpoint-volumes')],
      ]),
      props([
        ['URL', e.url && h('span', { class: 'mono break', id: 'endpoint-url' }, e.url)],
        ['Exposure', exposureText(e)],
        ['Pool', e.pool && h('span', { class: 'mono' }, e.pool)],
        ['Router', e.router ? 'SGLang router, cache-aware' : 'off'],
        ['Autoscaling', autoscalingText(e.autoscaling)],
        ['Created', simTimeEl(e.created_at)],
      ])));
    const pods = Array.isArray(e.pod_list) ? e.pod_list : Array.isArray(e.pods) ? e.pods : [];
    replace(podsSlot, pods.length
      ? h('div', { class: 'table-wrap' }, h('table', { class: 'table', id: 'endpoint-pods' },
        h('caption', { class: 'visually-hidden' }, 'Pods'),
        h('thead', {}, h('tr', {}, ['Pod', 'Phase', 'Node', 'Restarts'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, pods.map((p) => h('tr', { dataset: { pod: p.name } },
          h('th', { scope: 'row', class: 'mono' }, p.name), h('td', {}, phaseBadge(p.phase)),
          h('td', { class: 'mono' }, p.node || '—'), h('td', { class: 'counts' }, String(p.restarts ?? 0)))))))
      : h('p', { class: 'muted' }, 'No pods.'));
    const objects = Array.isArray(e.manifest) ? e.manifest : e.manifest ? [e.manifest] : [];
    if (manifestSlot.dataset.count !== String(objects.length)) {
      manifestSlot.dataset.count = String(objects.length);
      replace(manifestSlot, manifestList(objects));
    }
    // The scale form edits replicas, or the autoscaler's bounds once the ScaledObject exists
    // (it may appear after the Deployment): rebuilt when that changes, unless it is in use.
    const mode = e.autoscaling ? 'autoscaling' : 'replicas';
    if (e.foreign) return;
    if (!scaleSlot.dataset.built || (scaleSlot.dataset.mode !== mode && !scaleSlot.contains(document.activeElement))) {
      scaleSlot.dataset.mode = mode;
      buildScale(e);
    }
  }

  // Scale: replicas, or the autoscaler's bounds; only what changed is sent, the diff first.
  function buildScale(e) {
    scaleSlot.dataset.built = 'true';
    const a = e.autoscaling;
    // With autoscaling: its bounds, or "turn it off" (sent as autoscaling: null, alone or with
    // a fixed replica count; empty keeps the replicas the Deployment has then — the diff says).
    const bounds = a && h('div', { class: 'grid-3' },
      formField('autoscaling.min', 'Min replicas', { kind: 'number', value: String(a.min) }),
      formField('autoscaling.max', 'Max replicas', { kind: 'number', value: String(a.max) }),
      formField('autoscaling.cooldown_seconds', 'Cooldown (seconds)', { kind: 'number', value: String(a.cooldown_seconds ?? '') }));
    const offToggle = a && formField('autoscaling.off', 'Turn autoscaling off', {
      kind: 'checkbox',
      help: 'Deletes the ScaledObject; the Deployment then keeps a fixed replica count.',
    });
    const fixed = a && h('div', { class: 'grid-3', hidden: true },
      formField('replicas', 'Fixed replicas (optional)', { kind: 'number', placeholder: String(e.replicas?.desired ?? ''), help: 'Empty keeps the replicas it has at that moment.' }));
    if (a) {
      offToggle.querySelector('input').addEventListener('change', (ev) => {
        bounds.hidden = ev.target.checked;
        fixed.hidden = !ev.target.checked;
      });
    }
    const form = h('form', { class: 'editor-form', id: 'scale-form', novalidate: true },
      h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' }),
      a
        ? [bounds, offToggle, fixed]
        : h('div', { class: 'grid-3' }, formField('replicas', 'Replicas', { kind: 'number', value: String(e.replicas?.desired ?? 1), help: '0 stops every replica and keeps the endpoint.' })),
      h('div', { class: 'actions tight' }, h('button', { type: 'submit', class: 'btn', id: 'scale-review' }, 'Review change')));
    const reviewSlot = h('div', { 'aria-live': 'polite' });
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clearFindings(form);
      const v = readForm(form);
      const patch = {};
      if (a && v['autoscaling.off']) {
        patch.autoscaling = null;
        if (num(v.replicas) !== undefined) patch.replicas = num(v.replicas);
      } else if (a) {
        const want = { min_replicas: num(v['autoscaling.min']), max_replicas: num(v['autoscaling.max']), cooldown_seconds: num(v['autoscaling.cooldown_seconds']) };
        const have = { min_replicas: a.min, max_replicas: a.max, cooldown_seconds: a.cooldown_seconds };
        const changed = Object.fromEntries(Object.entries(want).filter(([k, x]) => x !== undefined && x !== have[k]));
        if (Object.keys(changed).length) patch.autoscaling = changed;
      } else {
        patch.replicas = num(v.replicas);
      }
      try {
        const { status, data } = await api.patch(path, patch, { query: { dry_run: true } });
        if (noChange(status, data)) {
          replace(reviewSlot, h('p', { class: 'notice ok no-change', role: 'status' }, h('strong', {}, 'Already in this state. '), 'Nothing to change.'));
          return;
        }
        const changes = planLines(data.plan, { replicas: 'Replicas', autoscaling: 'Autoscaling', 'autoscaling.min_replicas': 'Min replicas', 'autoscaling.max_replicas': 'Max replicas', 'autoscaling.cooldown_seconds': 'Cooldown' });
        const apply = h('button', { type: 'button', class: 'btn primary', id: 'scale-apply' }, 'Apply');
        const key = api.newIdempotencyKey();
        replace(reviewSlot, h('div', { class: 'review' },
          h('h4', {}, 'Change'),
          changes.length ? diffList(changes) : h('pre', {}, JSON.stringify(patch, null, 2)),
          h('div', { class: 'actions tight' }, apply)));
        apply.focus();
        apply.addEventListener('click', async () => {
          apply.disabled = true;
          try {
            const { status: st, data: d } = await api.patch(path, patch, { idempotencyKey: key });
            replace(reviewSlot);
            if (st === 200 && d && d.no_change) {
              replace(reviewSlot, h('p', { class: 'notice ok no-change', role: 'status' }, h('strong', {}, 'Already in this state.')));
              return;
            }
            busy = true;
            followOperation(activity, d.operation, {
              title: `Scale ${name}`, speed,
              onSettled: () => { busy = false; delete scaleSlot.dataset.built; load(); },
            });
            load();
          } catch (err) {
            apply.disabled = false;
            if (err.status === 401) return;
            if (err.findings.length) showFindings(form, err, { prefixes: ['patch'] });
            else replace(reviewSlot, refusal(err));
          }
        });
      } catch (err) {
        if (err.status === 401) return;
        if (err.findings.length || err.status === 400 || err.status === 422) showFindings(form, err, { prefixes: ['patch'] });
        else replace(reviewSlot, refusal(err));
      }
    });
    replace(scaleSlot, form, reviewSlot);
  }

  async function deleteEndpoint() {
    const op = await confirmedDelete({ what: 'endpoint', name, detail: DELETE_DETAIL, path, activity });
    if (!op) return;
    followOperation(activity, op, {
      title: `Delete endpoint ${name}`, speed,
      onSettled: (done) => {
        if (done.status !== 'succeeded') return;
        gone = true;
        clearTimeout(timer);
        ep = null;
        announce(`Endpoint ${name} deleted`);
        replace(errorBox, h('div', { class: 'notice ok', role: 'status', id: 'endpoint-deleted' }, h('strong', {}, 'Deleted. '),
          'Nothing of it is left on the cluster. ', h('a', { href: routeHref('clusters', cluster, 'endpoints') }, 'Back to the endpoints')));
      },
    });
  }

  const deleteButton = h('button', { type: 'button', class: 'btn danger-outline', id: 'delete-endpoint', onclick: deleteEndpoint }, 'Delete…');
  const foreignNote = h('p', { class: 'notice', id: 'foreign-note', role: 'note', hidden: true }, FOREIGN_TITLE);
  const scaleCard = h('section', { class: 'card', 'aria-labelledby': 'scale-title', id: 'scale-card' }, h('h2', { id: 'scale-title' }, 'Scale'), scaleSlot);
  const el = h('section', { class: 'view' },
    workloadHead(cluster, 'endpoints', name,
      h('button', { type: 'button', class: 'btn', onclick: () => { load(); announce('Endpoint refreshed'); } }, 'Refresh'),
      deleteButton),
    h('div', { class: 'title-line' }, badges),
    foreignNote, errorBox, activity,
    h('section', { class: 'card', 'aria-labelledby': 'ep-sum-title' }, h('h2', { id: 'ep-sum-title' }, 'Endpoint'), summary),
    h('div', { class: 'grid-2 cards' },
      chatBox({ path, model: () => null }),
      scaleCard),
    h('section', { class: 'card', 'aria-labelledby': 'ep-pods-title' }, h('h2', { id: 'ep-pods-title' }, 'Pods'), podsSlot),
    h('section', { class: 'card', 'aria-labelledby': 'ep-man-title' }, h('h2', { id: 'ep-man-title' }, 'Applied manifests'), manifestSlot));

  const opId = query.get('op');
  if (opId) {
    busy = true;
    followOperation(activity, { id: opId }, { title: `Deploy ${name}`, speed, onSettled: () => { busy = false; load(); } });
  }
  load();
  return {
    el,
    title: `${name} · ${cluster}`,
    dispose() {
      disposed = true;
      clearTimeout(timer);
    },
  };
}

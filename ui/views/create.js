// Create cluster: one form with decision-level questions only (name, region, AZs, Kubernetes
// version, HyperPod instance groups, bucket). CIDRs, route tables and security groups are the
// control plane's job. "Review plan" asks the backend for a dry run; "Create cluster" submits
// with an Idempotency-Key fixed for that plan, so a double click cannot create twice.
// Every input carries data-field="<request path>" so backend findings land next to it.
// The same form, reduced to its HyperPod part (and a bucket when the cluster has none), adds a
// HyperPod cluster to an EKS-only cluster (`addHyperPodView`, POST /api/clusters/{cluster}/hyperpod).

import { h, replace, id, duration, debounce, announce, words } from '../lib/dom.js';
import { badge } from '../components/status-badge.js';
import * as api from '../lib/api.js';
import { showFindings, clearFindings, openAncestors } from '../lib/forms.js';
import { estimate } from '../lib/progress.js';
import { typeLabel, typeInfo } from '../lib/instance-types.js';

/** Offered in the select (the versions EKS still creates); the backend validates the version: 400 with
 *  the allowed list, 422 when HyperPod does not support it (1.35: EKS-only clusters). */
const KUBERNETES_VERSIONS = ['1.35', '1.34', '1.33', '1.32'];
const DEFAULT_KUBERNETES_VERSION = '1.33';
const REGIONS = ['us-east-1', 'us-east-2', 'us-west-1', 'us-west-2', 'ca-central-1', 'eu-west-1', 'eu-west-2',
  'eu-central-1', 'eu-north-1', 'eu-south-2', 'ap-northeast-1', 'ap-south-1', 'ap-southeast-1', 'ap-southeast-2',
  'ap-southeast-3', 'sa-east-1'];

/** A number when the text is a whole number; otherwise the text itself, so the backend names the field. */
function whole(text) {
  const t = String(text).trim();
  if (/^\d+$/.test(t)) return Number(t);
  return t === '' ? null : t;
}

function field(labelText, control, help) {
  const helpId = help ? id('help') : null;
  if (helpId) control.setAttribute('aria-describedby', helpId);
  return h('div', { class: 'field' },
    h('label', { for: control.id }, labelText),
    control,
    help && h('p', { class: 'help', id: helpId }, help));
}

function radios(name, legend, options, checked, fieldPath) {
  const fs = h('fieldset', { class: 'radios', dataset: { field: fieldPath } }, h('legend', {}, legend));
  for (const [value, text, help] of options) {
    const rid = id(name);
    fs.append(h('div', { class: 'check' },
      h('input', { type: 'radio', name, id: rid, value, checked: value === checked }),
      h('label', { for: rid }, text, help && h('span', { class: 'muted' }, ` — ${help}`))));
  }
  return fs;
}

export function createView({ app }) {
  return clusterForm({ app, attach: null });
}

/** Add HyperPod to the EKS-only cluster `params[0]`: create's HyperPod part, on the cluster's region. */
export function addHyperPodView({ app, params }) {
  const [cluster] = params;
  const slot = h('section', { class: 'view' },
    h('div', { class: 'view-head' }, h('h1', {}, `Add HyperPod to ${cluster}`)),
    h('p', { class: 'muted' }, 'Reading the cluster…'));
  let inner = null;
  api.get(`/api/clusters/${api.seg(cluster)}`).then((c) => {
    if (c.hyperpod_cluster) {
      replace(slot, h('div', { class: 'view-head' }, h('h1', {}, `Add HyperPod to ${cluster}`)),
        h('p', { class: 'notice warn', role: 'status' }, `${cluster} already has HyperPod cluster ${c.hyperpod_cluster}. `,
          h('a', { href: `#/clusters/${encodeURIComponent(cluster)}` }, 'Back to the cluster')));
      return;
    }
    inner = clusterForm({ app, attach: { cluster, region: c.region, bucket: c.bucket } });
    replace(slot, ...inner.el.childNodes);
  }).catch((err) => {
    if (err.status === 401) return;
    replace(slot, h('div', { class: 'notice bad', role: 'alert' }, h('strong', {}, `${err.title}. `), err.message));
  });
  return { el: slot, title: `Add HyperPod to ${cluster}`, dispose() { if (inner) inner.dispose(); } };
}

function clusterForm({ app, attach }) {
  const st = { zones: [], types: [], groups: [], plan: null, key: null, region: null, loading: null };
  const speed = app.simSpeed();

  // ---- cluster basics --------------------------------------------------------------------
  const name = h('input', { id: 'f-name', name: 'name', autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. ml-team-a', dataset: { field: 'name' } });
  const region = h('input', { id: 'f-region', name: 'region', list: 'region-list', autocomplete: 'off', spellcheck: 'false', value: attach ? attach.region : (app.context?.default_region || 'us-east-1'), readonly: !!attach, dataset: { field: 'region' } });
  const regionStatus = h('p', { class: 'help', 'aria-live': 'polite' });
  const capacityHref = () => `#/capacity?region=${encodeURIComponent(region.value.trim())}`;
  const capacityLink = h('a', { href: '#/capacity', id: 'capacity-link' }, 'Quotas, training plans and offerings of this region');
  const version = h('select', { id: 'f-version', name: 'kubernetes_version', dataset: { field: 'kubernetes_version' } },
    KUBERNETES_VERSIONS.map((v) => h('option', { value: v, selected: v === DEFAULT_KUBERNETES_VERSION }, v === DEFAULT_KUBERNETES_VERSION ? `${v} (default)` : v)));
  const azBox = h('div', { class: 'checks-grid' }, h('p', { class: 'muted' }, 'Loading zones…'));
  const azSet = h('fieldset', { class: 'az-set', dataset: { field: 'availability_zones' } },
    h('legend', {}, 'Availability Zones'),
    h('p', { class: 'help' }, 'At least two, as EKS requires. Public and private subnets are planned in each.'),
    azBox);

  // ---- HyperPod ----------------------------------------------------------------------------
  const withHp = h('input', { type: 'checkbox', id: 'f-hyperpod', checked: true, dataset: { field: 'hyperpod' } });
  const recovery = h('input', { type: 'checkbox', id: 'f-recovery', checked: true, dataset: { field: 'hyperpod.node_recovery' } });
  const groupList = h('div', { class: 'groups' });
  const addGroupBtn = h('button', { type: 'button', class: 'btn', onclick: () => { addGroup(); st.groups.at(-1).name.focus(); } }, '+ Add instance group');
  const hpBody = h('fieldset', { class: 'hp-body', dataset: { field: 'hyperpod.instance_groups' } },
    h('legend', {}, 'Instance groups'),
    h('p', { class: 'help' }, 'Capacity type and EFA-only mode are fixed for a group’s lifetime. Each group gets a /20 compute subnet in its Availability Zone.'),
    groupList, addGroupBtn);

  // ---- storage and advanced --------------------------------------------------------------
  const bucket = h('input', { id: 'f-bucket', name: 'bucket', autocomplete: 'off', spellcheck: 'false', placeholder: attach ? 'is-…' : 'derived from the cluster name', dataset: { field: attach ? 'bucket' : 'storage.bucket' } });
  const mount = h('input', { id: 'f-mount', name: 'mount_path', autocomplete: 'off', spellcheck: 'false', value: '/s3', dataset: { field: 'storage.mount_path' } });
  const cidr = h('input', { id: 'f-cidr', name: 'cidr', autocomplete: 'off', spellcheck: 'false', placeholder: '10.0.0.0/16', dataset: { field: 'network.cidr' } });
  const apiAccess = h('input', { id: 'f-api-access', name: 'public_access_cidrs', autocomplete: 'off', spellcheck: 'false', placeholder: '203.0.113.0/24, 198.51.100.7/32', dataset: { field: 'public_access_cidrs' } });

  const reviewBtn = h('button', { type: 'submit', class: 'btn primary' }, 'Review plan');
  // Adding HyperPod: the cluster's region (read-only, for its zones and types), no name, zones,
  // network or mount path; a bucket only when the cluster has none.
  const clusterSection = attach
    ? h('section', { class: 'card form-section', 'aria-labelledby': 'sec-cluster' },
      h('h2', { id: 'sec-cluster' }, 'EKS cluster'),
      h('div', { class: 'grid-3' }, h('div', { class: 'field' }, h('label', { for: 'f-region' }, 'Region'), region, regionStatus)),
      h('p', { class: 'help' }, `HyperPod is placed in the VPC of ${attach.cluster}’s EKS cluster; each group gets a /20 compute subnet there.`))
    : h('section', { class: 'card form-section', 'aria-labelledby': 'sec-cluster' },
      h('h2', { id: 'sec-cluster' }, 'Cluster'),
      h('div', { class: 'grid-3' },
        field('Name', name, 'Lowercase letters, digits and hyphens. Every AWS resource name derives from it.'),
        h('div', { class: 'field' }, h('label', { for: 'f-region' }, 'Region'), region, regionStatus, h('p', { class: 'help' }, capacityLink),
          h('datalist', { id: 'region-list' }, REGIONS.map((r) => h('option', { value: r })))),
        field('Kubernetes version', version)),
      azSet);
  const storageSection = attach
    ? (!attach.bucket && h('section', { class: 'card form-section', 'aria-labelledby': 'sec-storage' },
      h('h2', { id: 'sec-storage' }, 'Storage'),
      h('div', { class: 'grid-2' },
        field('S3 bucket', bucket, 'The cluster has no bucket: name one for the lifecycle script and the shared /s3 mount. It must start with is- (or be the shared bucket) and be in the cluster’s region; created if it does not exist.'))))
    : h('section', { class: 'card form-section', 'aria-labelledby': 'sec-storage' },
      h('h2', { id: 'sec-storage' }, 'Storage'),
      h('div', { class: 'grid-2' },
        field('S3 bucket (optional)', bucket, 'Mounted at the same path in every pod. Empty: the management environment\'s shared bucket (mounted there too) when the server has one for this region, else a new bucket for this cluster. A name you give must start with is- (or be the shared bucket); created if it does not exist.')));
  const planSlot = h('div', { class: 'plan-slot' });

  const form = h('form', { class: 'create-form', novalidate: true },
    h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' }),
    clusterSection,
    h('section', { class: 'card form-section', 'aria-labelledby': 'sec-hp' },
      h('h2', { id: 'sec-hp' }, 'HyperPod'),
      !attach && h('div', { class: 'field check' }, withHp, h('label', { for: 'f-hyperpod' }, 'Create a HyperPod cluster on this EKS cluster')),
      h('div', { class: 'field check' }, recovery,
        h('label', { for: 'f-recovery' }, 'Node auto-recovery'),
        h('p', { class: 'help' }, 'HyperPod reboots or replaces faulty nodes found by its health-monitoring agent.')),
      hpBody),
    storageSection,
    !attach && h('details', { class: 'card advanced' },
      h('summary', {}, 'Advanced'),
      h('p', { class: 'help' }, 'Subnets, route tables and security groups are computed by the control plane. Override only if the default range collides with networks you peer with.'),
      h('div', { class: 'grid-2' },
        field('VPC CIDR', cidr, 'A private /16 to /20. Leave empty for 10.0.0.0/16.'),
        field('Mount path in pods', mount)),
      field('EKS API reachable from (CIDR blocks, comma-separated)', apiAccess, 'Internet addresses that may use kubectl on the cluster\'s public endpoint, e.g. your office. The control plane\'s own address is added by the server. Empty: the server\'s choice (its own address, or every address when it has none).')),
    h('div', { class: 'form-actions' }, reviewBtn,
      h('span', { class: 'muted' }, 'Nothing is created until you confirm the plan.')),
    planSlot);

  // ---- instance groups ---------------------------------------------------------------------
  function addGroup(initial = {}) {
    const g = { uid: id('g') };
    g.name = h('input', { id: `${g.uid}-name`, autocomplete: 'off', spellcheck: 'false', value: initial.name || (st.groups.length ? `group-${st.groups.length + 1}` : 'workers') });
    g.az = h('select', { id: `${g.uid}-az` });
    g.type = h('select', { id: `${g.uid}-type` });
    g.info = h('p', { class: 'help type-info' });
    g.count = h('input', { id: `${g.uid}-count`, type: 'number', min: 0, step: 1, inputmode: 'numeric', value: String(initial.count ?? 2) });
    g.ebs = h('input', { id: `${g.uid}-ebs`, type: 'number', min: 1, step: 1, inputmode: 'numeric', value: '500' });
    g.capacity = radios(`${g.uid}-cap`, 'Capacity type', [
      ['on_demand', 'On-demand'],
      ['training_plan', 'Training plan', 'reserved capacity in the plan’s AZ'],
      ['spot', 'Spot', 'interruptible; not for elastic training'],
    ], 'on_demand', '');
    g.arn = h('input', { id: `${g.uid}-arn`, autocomplete: 'off', spellcheck: 'false', placeholder: 'arn:aws:sagemaker:<region>:<account>:training-plan/<name>' });
    g.plansLink = h('a', { href: capacityHref(), class: 'plans-link' }, 'Your training plans and what could be reserved');
    g.arnField = h('div', {}, field('Training plan ARN', g.arn), h('p', { class: 'help' }, g.plansLink));
    g.arnField.hidden = true;
    g.mode = radios(`${g.uid}-mode`, 'Network interfaces', [
      ['standard', 'Standard', 'ENA plus EFA where the type has it'],
      ['efa_only', 'EFA-only', 'high-end accelerators only'],
    ], 'standard', '');
    g.stress = h('input', { type: 'checkbox', id: `${g.uid}-stress` });
    g.conn = h('input', { type: 'checkbox', id: `${g.uid}-conn` });
    g.checks = h('fieldset', { class: 'checks' }, h('legend', {}, 'Deep health checks before nodes accept work'),
      h('div', { class: 'check' }, g.stress, h('label', { for: g.stress.id }, 'Accelerator stress test')),
      h('div', { class: 'check' }, g.conn, h('label', { for: g.conn.id }, 'EFA connectivity test')));
    g.legend = h('legend', {});
    g.remove = h('button', { type: 'button', class: 'btn small ghost', onclick: () => removeGroup(g) }, 'Remove');
    g.el = h('fieldset', { class: 'group card inset' }, g.legend,
      h('div', { class: 'group-remove' }, g.remove),
      h('div', { class: 'grid-4' },
        field('Group name', g.name),
        field('Availability Zone', g.az),
        h('div', { class: 'field span-2' }, h('label', { for: g.type.id }, 'Instance type'), g.type, g.info),
        field('Instance count', g.count, 'Zero is allowed (scale from zero).'),
        field('Extra EBS per node (GB)', g.ebs)),
      h('div', { class: 'grid-3' }, h('div', {}, g.capacity, g.arnField), g.mode, g.checks));
    g.capacity.addEventListener('change', () => {
      g.arnField.hidden = capValue(g) !== 'training_plan';
      g.plansLink.href = capacityHref();
      if (!g.arnField.hidden) g.arn.focus();
    });
    g.az.addEventListener('change', () => fillTypes(g));
    g.type.addEventListener('change', () => showTypeInfo(g));
    st.groups.push(g);
    groupList.append(g.el);
    fillZonesOf(g, initial.az);
    reindex();
    return g;
  }

  function removeGroup(g) {
    const i = st.groups.indexOf(g);
    st.groups.splice(i, 1);
    g.el.remove();
    reindex();
    announce(`Instance group removed; ${st.groups.length} left`);
    (st.groups[Math.max(0, i - 1)]?.name || addGroupBtn).focus();
    invalidatePlan();
  }

  const capValue = (g) => g.capacity.querySelector('input:checked')?.value || 'on_demand';
  const modeValue = (g) => g.mode.querySelector('input:checked')?.value || 'standard';

  /** data-field paths follow the group's position in the request. */
  function reindex() {
    st.groups.forEach((g, i) => {
      const p = `hyperpod.instance_groups[${i}]`;
      g.legend.textContent = `Instance group ${i + 1}`;
      g.el.dataset.field = p;
      g.name.dataset.field = `${p}.name`;
      g.az.dataset.field = `${p}.availability_zone`;
      g.type.dataset.field = `${p}.instance_type`;
      g.count.dataset.field = `${p}.count`;
      g.ebs.dataset.field = `${p}.ebs_volume_gb`;
      g.capacity.dataset.field = `${p}.capacity`;
      g.arn.dataset.field = `${p}.capacity.arn`;
      g.mode.dataset.field = `${p}.interface_mode`;
      g.checks.dataset.field = `${p}.deep_health_checks`;
      g.stress.dataset.field = `${p}.deep_health_checks.stress`;
      g.conn.dataset.field = `${p}.deep_health_checks.connectivity`;
      g.remove.setAttribute('aria-label', `Remove instance group ${i + 1}`);
      g.remove.disabled = st.groups.length === 1;
    });
  }

  function fillZonesOf(g, preferred) {
    const keep = preferred || g.az.value || selectedZones()[0] || st.zones[0]?.name;
    replace(g.az, st.zones.length
      ? st.zones.map((z) => h('option', { value: z.name, selected: z.name === keep }, `${z.name} (${z.zone_id})`))
      : h('option', { value: '' }, 'No zones loaded'));
    fillTypes(g);
  }

  function fillTypes(g) {
    const az = g.az.value;
    const offered = st.types.filter((t) => t.availability_zones.includes(az));
    const prev = g.type.value;
    const accel = offered.filter((t) => t.info && t.info.accelerators > 0);
    const cpu = offered.filter((t) => t.info && !(t.info.accelerators > 0));
    const unknown = offered.filter((t) => !t.info);
    const smallestAccel = [...accel].sort((a, b) => (a.info.accelerators - b.info.accelerators) || (a.info.memory_gib - b.info.memory_gib))[0];
    const choice = offered.some((t) => t.instance_type === prev) ? prev : (smallestAccel || offered[0])?.instance_type;
    const opt = (t) => h('option', { value: t.instance_type, selected: t.instance_type === choice }, typeLabel(t));
    replace(g.type, offered.length
      ? [accel.length && h('optgroup', { label: 'Accelerated' }, accel.map(opt)), cpu.length && h('optgroup', { label: 'CPU' }, cpu.map(opt)),
        unknown.length && h('optgroup', { label: 'Specs not described by EC2' }, unknown.map(opt))]
      : h('option', { value: '' }, az ? `No HyperPod instance types offered in ${az}` : 'Choose an Availability Zone'));
    showTypeInfo(g);
  }

  function showTypeInfo(g) {
    g.info.textContent = typeInfo(st.types.find((t) => t.instance_type === g.type.value));
  }

  function selectedZones() {
    return [...azBox.querySelectorAll('input[type=checkbox]:checked')].map((c) => c.value);
  }

  // ---- region → zones and instance types ---------------------------------------------------
  async function loadRegion() {
    const r = region.value.trim();
    if (!r || r === st.region) return;
    st.region = r;
    const mine = (st.loading = Symbol(r));
    regionStatus.textContent = `Reading zones and instance types of ${r}…`;
    try {
      const [zones, types] = await Promise.all([
        api.get('/api/context/zones', { query: { region: r } }),
        api.get('/api/context/instance-types', { query: { region: r } }),
      ]);
      if (st.loading !== mine) return;
      const before = new Set(selectedZones());
      st.zones = zones;
      st.types = types;
      const keep = zones.filter((z) => before.has(z.name)).map((z) => z.name);
      const chosen = new Set(keep.length ? keep : zones.slice(0, 2).map((z) => z.name));
      replace(azBox, zones.length ? zones.map((z) => {
        const cid = id('az');
        return h('div', { class: 'check' },
          h('input', { type: 'checkbox', id: cid, value: z.name, checked: chosen.has(z.name), name: 'availability_zones' }),
          h('label', { for: cid }, z.name, ' ', h('span', { class: 'muted' }, z.zone_id)));
      }) : h('p', { class: 'muted' }, `No Availability Zones found in ${r}.`));
      for (const g of st.groups) fillZonesOf(g);
      const offeredTypes = types.filter((t) => t.availability_zones.length).length;
      regionStatus.textContent = `${zones.length} zones, ${offeredTypes} of ${types.length} HyperPod instance types offered in ${r}.`;
      capacityLink.href = capacityHref();
    } catch (err) {
      if (st.loading !== mine) return;
      st.region = null;
      st.zones = [];
      st.types = [];
      replace(azBox, h('p', { class: 'inline-error' }, `Could not read the zones of ${r}: ${err.message}`));
      regionStatus.textContent = '';
      for (const g of st.groups) fillZonesOf(g);
    }
  }
  const loadRegionSoon = debounce(loadRegion, 400);
  region.addEventListener('input', loadRegionSoon);
  region.addEventListener('change', loadRegion);

  // ---- request, plan, submit ---------------------------------------------------------------
  /** Where the request goes: create, or add HyperPod to the cluster. */
  const endpoint = attach ? `/api/clusters/${api.seg(attach.cluster)}/hyperpod` : '/api/clusters';

  function buildRequest() {
    if (attach) {
      const req = { hyperpod: hyperpodRequest() };
      const b = bucket.value.trim();
      if (b) req.bucket = b;
      return req;
    }
    return clusterRequest();
  }

  function hyperpodRequest() {
    return {
      node_recovery: recovery.checked ? 'Automatic' : 'None',
      instance_groups: st.groups.map((g) => {
        const cap = capValue(g);
        return {
          name: g.name.value.trim(),
          instance_type: g.type.value,
          count: whole(g.count.value),
          availability_zone: g.az.value,
          capacity: cap === 'training_plan' ? { type: cap, arn: g.arn.value.trim() } : { type: cap },
          interface_mode: modeValue(g),
          ebs_volume_gb: whole(g.ebs.value),
          deep_health_checks: { stress: g.stress.checked, connectivity: g.conn.checked },
        };
      }),
    };
  }

  function clusterRequest() {
    const zones = selectedZones();
    azBox.querySelectorAll('input[type=checkbox]').forEach((c) => { delete c.dataset.field; });
    zones.forEach((z, i) => {
      const box = azBox.querySelector(`input[value="${CSS.escape(z)}"]`);
      if (box) box.dataset.field = `availability_zones[${i}]`;
    });
    const req = {
      name: name.value.trim(),
      region: region.value.trim(),
      kubernetes_version: version.value,
      availability_zones: zones,
    };
    if (cidr.value.trim()) req.network = { mode: 'new_vpc', cidr: cidr.value.trim() };
    const blocks = apiAccess.value.split(',').map((s) => s.trim()).filter(Boolean);
    if (blocks.length) req.public_access_cidrs = blocks;
    if (withHp.checked) req.hyperpod = hyperpodRequest();
    const b = bucket.value.trim();
    const m = mount.value.trim();
    if (b || (m && m !== '/s3')) req.storage = { bucket: b || null, mount_path: m || '/s3' };
    return req;
  }

  function invalidatePlan() {
    if (st.plan) {
      st.plan = null;
      st.key = null;
      replace(planSlot, h('p', { class: 'notice muted', role: 'status' }, 'The request changed; review the plan again.'));
    }
  }

  function showErrors(err) {
    showFindings(form, err);
    for (const bad of form.querySelectorAll('.has-error')) openAncestors(bad);
  }

  form.addEventListener('input', (e) => { if (e.target !== region) invalidatePlan(); });
  form.addEventListener('change', (e) => {
    if (e.target === withHp) {
      hpBody.disabled = !withHp.checked;
      recovery.disabled = !withHp.checked;
    }
    invalidatePlan();
  });

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearFindings(form);
    replace(planSlot);
    const body = buildRequest();
    reviewBtn.disabled = true;
    reviewBtn.setAttribute('aria-busy', 'true');
    try {
      const { data } = await api.post(endpoint, body, { query: { dry_run: true } });
      st.plan = { body, data };
      st.key = api.newIdempotencyKey();
      renderPlan();
    } catch (err) {
      if (err.status !== 401) showErrors(err);
    } finally {
      reviewBtn.disabled = false;
      reviewBtn.removeAttribute('aria-busy');
    }
  });

  function renderPlan() {
    const { data } = st.plan;
    const fake = (s) => ({ ...s, phase: 'pending', started_at: null, finished_at: null });
    const critical = (sp) => estimate({ status: 'running', steps: data.steps.map(fake) }, sp, 0).remaining;
    const real = critical(1);
    const here = speed ? critical(speed) : null;
    const submitLabel = attach ? 'Add HyperPod' : 'Create cluster';
    const submit = h('button', { type: 'button', class: 'btn primary', id: 'create-submit' }, submitLabel);
    const errorBox = h('div', { class: 'notice bad', role: 'alert', hidden: true });
    submit.addEventListener('click', () => create(submit, errorBox));
    // Preflight (quotas, offerings, training plans, address space): explained now, not failed late.
    const checks = Array.isArray(data.checks) ? data.checks : [];
    const failed = checks.filter((c) => c.status === 'fail');
    if (failed.length) {
      showFindings(form, new api.ApiError(422, {
        title: 'Preflight checks failed',
        findings: failed.map((c) => ({ field: c.field, rule: c.remedy ? `${c.detail} — ${c.remedy}` : c.detail })),
      }), { focus: false });
      for (const bad of form.querySelectorAll('.has-error')) openAncestors(bad);
      submit.disabled = true;
    }
    const checkList = checks.length > 0 && h('div', { class: 'preflight' },
      h('h3', {}, 'Preflight checks'),
      h('ul', { class: 'checks-list' }, checks.map((c) => h('li', { dataset: { check: c.check, status: c.status, field: c.field } },
        badge(c.status), ' ', h('span', { class: 'check-name' }, words(c.check)), ' ',
        h('span', { class: 'mono muted' }, c.field), h('div', { class: 'check-detail' }, c.detail),
        c.remedy && h('div', { class: 'help' }, c.remedy)))),
      failed.length > 0 && h('p', { class: 'inline-error' }, `Fix the failed checks (marked next to their fields) before ${attach ? 'adding HyperPod' : 'creating'}.`));
    const section = h('section', { class: 'card plan', tabindex: '-1', 'aria-labelledby': 'plan-title' },
      h('h2', { id: 'plan-title' }, `Plan for ${data.target}`),
      h('p', {}, `${data.steps.length} steps, about ${duration(real)} at AWS speed`,
        here !== null ? ` (about ${duration(here)} on the simulated cloud at ${speed}×)` : '',
        '. Independent steps run in parallel. Nothing has been created yet.'),
      checkList,
      h('h3', {}, 'Steps'),
      h('ol', { class: 'plan-steps' }, data.steps.map((s) => h('li', { dataset: { stepKey: s.key } },
        h('span', { class: 'plan-step-title' }, s.title),
        h('span', { class: 'muted plan-step-meta' },
          h('span', { class: 'mono' }, s.key),
          s.depends_on.length ? ` · after ${s.depends_on.join(', ')}` : ' · starts at once',
          s.expected_secs ? ` · ~${duration(s.expected_secs * 1000)}` : '')))),
      h('details', { class: 'json' }, h('summary', {}, 'Request as it will be recorded'),
        h('pre', {}, JSON.stringify(data.request, null, 2))),
      errorBox,
      h('div', { class: 'actions' }, submit,
        h('button', { type: 'button', class: 'btn', onclick: () => (attach ? st.groups[0]?.name : name)?.focus() }, 'Edit request')));
    replace(planSlot, section);
    section.scrollIntoView({ block: 'start', behavior: 'instant' });
    section.focus({ preventScroll: true });
  }

  async function create(btn, errorBox) {
    if (!st.plan || btn.disabled) return;
    btn.disabled = true;
    btn.setAttribute('aria-busy', 'true');
    btn.textContent = attach ? 'Adding…' : 'Creating…';
    errorBox.hidden = true;
    try {
      const { data } = await api.post(endpoint, st.plan.body, { idempotencyKey: st.key });
      announce(data.replayed ? 'Already submitted; following the operation' : (attach ? 'Adding HyperPod started' : 'Cluster creation started'));
      app.navigate(`#/operations/${encodeURIComponent(data.operation.id)}`);
    } catch (err) {
      if (err.status === 401) return;
      btn.disabled = false;
      btn.removeAttribute('aria-busy');
      btn.textContent = attach ? 'Add HyperPod' : 'Create cluster';
      if (err.findings.length) {
        showErrors(err);
        return;
      }
      errorBox.hidden = false;
      replace(errorBox, h('strong', {}, `${err.title}. `), err.message,
        err.problem.operation_id ? [' ', h('a', { href: `#/operations/${encodeURIComponent(err.problem.operation_id)}` }, 'Open that operation')] : []);
    }
  }

  addGroup();
  loadRegion();

  const title = attach ? `Add HyperPod to ${attach.cluster}` : 'Create cluster';
  const el = h('section', { class: 'view' },
    h('div', { class: 'view-head' }, h('h1', {}, title)),
    h('p', { class: 'lede muted' }, attach
      ? 'Missing add-ons and the HyperPod dependencies → execution role, lifecycle script, compute subnets → HyperPod → storage. The EKS cluster and what is on it stay as they are.'
      : 'Network → EKS control plane → active cluster → add-ons → HyperPod → storage. Each step records its own status and can be retried on its own.'),
    form);
  return { el, title, dispose() { loadRegionSoon.cancel(); } };
}

// HyperPod capacity of a region (#/capacity?region=, read-only): the "<type> for cluster usage"
// quotas with what the region's clusters use, the account's training plans, and a small search
// of the training plan offerings HyperPod clusters could reserve. Buying a plan is outside
// InstantStart (SageMaker console); an Active plan's ARN is then a capacity choice on the create
// screen, which links here for its region.

import { h, replace, timeEl, debounce } from '../lib/dom.js';
import * as api from '../lib/api.js';
import { badge } from '../components/status-badge.js';
import { showFindings, clearFindings } from '../lib/forms.js';

const RESERVABLE = ['ml.p4d.24xlarge', 'ml.p4de.24xlarge', 'ml.p5.4xlarge', 'ml.p5.48xlarge', 'ml.p5e.48xlarge',
  'ml.p5en.48xlarge', 'ml.p6-b200.48xlarge', 'ml.p6-b300.48xlarge', 'ml.p6e-gb200.36xlarge', 'ml.trn1.32xlarge',
  'ml.trn2.48xlarge'];

function table(id, head, rows, empty) {
  if (!rows.length) return h('p', { class: 'muted' }, empty);
  return h('div', { class: 'table-wrap' }, h('table', { class: 'table', id },
    h('thead', {}, h('tr', {}, head.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, rows)));
}

export function capacityView({ app, query }) {
  const region = h('input', { id: 'capacity-region', name: 'region', value: query.get('region') || app.context?.default_region || '', autocomplete: 'off' });
  const quotasSlot = h('div', { id: 'quotas-slot' }, h('p', { class: 'muted' }, 'Reading the quotas…'));
  const plansSlot = h('div', { id: 'plans-slot' }, h('p', { class: 'muted' }, 'Reading the training plans…'));
  const offeringsSlot = h('div', { id: 'offerings-slot', 'aria-live': 'polite' });
  const type = h('select', { id: 'offering-type', name: 'instance_type', dataset: { field: 'instance_type' } },
    RESERVABLE.map((t) => h('option', { value: t, selected: t === 'ml.p5.48xlarge' }, t)));
  const count = h('input', { id: 'offering-count', name: 'instance_count', type: 'number', min: 1, max: 256, value: 2, dataset: { field: 'instance_count' } });
  const hours = h('input', { id: 'offering-hours', name: 'duration_hours', type: 'number', min: 1, value: 24, dataset: { field: 'duration_hours' } });
  const startAfter = h('input', { id: 'offering-start', name: 'start_after', type: 'date', dataset: { field: 'start_after' } });
  const endBefore = h('input', { id: 'offering-end', name: 'end_before', type: 'date', dataset: { field: 'end_before' } });
  const field = (label, input, help) => h('div', { class: 'field', dataset: { field: input.dataset.field } },
    h('label', { for: input.id }, label), input, help && h('div', { class: 'help' }, help));
  const form = h('form', { class: 'offerings-form', id: 'offerings-form', novalidate: true, onsubmit: (e) => { e.preventDefault(); search(); } },
    h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' }),
    h('div', { class: 'grid-3' },
      field('Instance type', type),
      field('Instances', count, '1–256'),
      field('Duration (hours)', hours),
      field('Start after', startAfter, 'Optional'),
      field('End before', endBefore, 'Optional')),
    h('button', { type: 'submit', class: 'btn primary', id: 'offerings-search' }, 'Search offerings'));

  async function loadRegion() {
    const r = region.value.trim();
    replace(quotasSlot, h('p', { class: 'muted' }, 'Reading the quotas…'));
    replace(plansSlot, h('p', { class: 'muted' }, 'Reading the training plans…'));
    const [quotas, plans] = await Promise.allSettled([
      api.get('/api/context/quotas', { query: { region: r } }),
      api.get('/api/context/training-plans', { query: { region: r } }),
    ]);
    if (quotas.status === 'fulfilled') {
      const rows = quotas.value.filter((q) => q.value > 0 || q.in_use > 0).map((q) => h('tr', { dataset: { instanceType: q.instance_type } },
        h('th', { scope: 'row', class: 'mono' }, q.instance_type),
        h('td', {}, String(q.value)),
        h('td', {}, String(q.in_use)),
        h('td', {}, String(q.available)),
        h('td', { class: 'mono muted' }, q.code)));
      const zero = quotas.value.length - rows.length;
      replace(quotasSlot,
        table('quotas-table', ['Instance type', 'Quota', 'In use', 'Available', 'Code'], rows, 'No HyperPod quotas reported in this region.'),
        zero > 0 && h('p', { class: 'muted small-text' }, `${zero} more types have a quota of 0: request an increase in Service Quotas to use them.`));
    } else {
      replace(quotasSlot, h('p', { class: 'inline-error', role: 'alert' }, quotas.reason.message));
    }
    if (plans.status === 'fulfilled') {
      replace(plansSlot, table('plans-table', ['Name', 'Status', 'Instance type', 'Availability Zone', 'Instances', 'In use', 'Start', 'End'],
        plans.value.map((p) => h('tr', { dataset: { plan: p.arn } },
          h('th', { scope: 'row' }, p.name, h('div', { class: 'mono muted small-text break' }, p.arn)),
          h('td', {}, badge(p.status)),
          h('td', { class: 'mono' }, p.instance_type || '—'),
          h('td', {}, p.availability_zone || '—'),
          h('td', {}, String(p.total_instance_count)),
          h('td', {}, p.in_use_instance_count ?? '—'),
          h('td', {}, timeEl(p.start_time)),
          h('td', {}, timeEl(p.end_time)))),
        'No training plans in this region.'));
    } else {
      replace(plansSlot, h('p', { class: 'inline-error', role: 'alert' }, plans.reason.message));
    }
  }

  async function search() {
    clearFindings(form);
    const q = {
      region: region.value.trim(),
      instance_type: type.value,
      instance_count: count.value,
      duration_hours: hours.value,
      start_after: startAfter.value ? `${startAfter.value}T00:00:00Z` : '',
      end_before: endBefore.value ? `${endBefore.value}T00:00:00Z` : '',
    };
    replace(offeringsSlot, h('p', { class: 'muted' }, 'Searching…'));
    try {
      const offerings = await api.get('/api/context/training-plan-offerings', { query: q });
      replace(offeringsSlot, table('offerings-table', ['Offering', 'Instances', 'Availability Zone', 'Start', 'End', 'Hours', 'Upfront fee'],
        offerings.map((o) => h('tr', { dataset: { offering: o.offering_id } },
          h('th', { scope: 'row', class: 'mono' }, o.offering_id),
          h('td', {}, `${o.instance_count} × ${o.instance_type}`),
          h('td', {}, o.availability_zone || '—'),
          h('td', {}, timeEl(o.start_time)),
          h('td', {}, timeEl(o.end_time)),
          h('td', {}, o.duration_hours ?? '—'),
          h('td', {}, o.upfront_fee ? `${o.upfront_fee} ${o.currency_code || ''}` : '—'))),
        'No offering matches: try another window, fewer instances or a shorter duration.'),
      offerings.length > 0 && h('p', { class: 'help' }, 'InstantStart does not buy plans: reserve one in the SageMaker console (Training plans), then use its ARN as an instance group’s capacity.'));
    } catch (err) {
      if (err.status === 401) return;
      if (err.findings.length) {
        showFindings(form, err, { compact: true });
        replace(offeringsSlot);
      } else {
        replace(offeringsSlot, h('p', { class: 'inline-error', role: 'alert' }, `${err.title}. ${err.message}`));
      }
    }
  }

  region.addEventListener('change', loadRegion);
  region.addEventListener('input', debounce(loadRegion, 600));
  loadRegion();

  const el = h('section', { class: 'view' },
    h('div', { class: 'view-head' }, h('h1', {}, 'HyperPod capacity')),
    h('div', { class: 'field inline' }, h('label', { for: 'capacity-region' }, 'Region '), region),
    h('section', { class: 'card', 'aria-labelledby': 'quotas-title' },
      h('h2', { id: 'quotas-title' }, 'Quotas'),
      h('p', { class: 'help' }, 'Service Quotas’ “<type> for cluster usage”, and the instances this region’s HyperPod clusters use now (on-demand and Spot groups).'),
      quotasSlot),
    h('section', { class: 'card', 'aria-labelledby': 'plans-title' },
      h('h2', { id: 'plans-title' }, 'Training plans'),
      h('p', { class: 'help' }, 'Reserved capacity of this account. An Active plan is a capacity choice for an instance group in the plan’s Availability Zone.'),
      plansSlot),
    h('section', { class: 'card', 'aria-labelledby': 'offerings-title' },
      h('h2', { id: 'offerings-title' }, 'Training plan offerings'),
      h('p', { class: 'help' }, 'What a training plan for HyperPod clusters could reserve. Read-only: buying a plan is outside InstantStart.'),
      form, offeringsSlot));
  return { el, title: 'HyperPod capacity' };
}

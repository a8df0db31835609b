// The delete-cluster dialog (clusters list and cluster page): the plan read with a dry run, the
// bucket and tracking-server options, and the name typed to confirm.

import { h, replace } from '../lib/dom.js';
import * as api from '../lib/api.js';
import { openDialog } from './dialog.js';

/** Delete with the plan shown and the name typed; options: delete the bucket too, keep the tracking servers. */
export async function deleteDialog(app, cluster) {
  const key = api.newIdempotencyKey();
  const planSlot = h('div', { class: 'plan-mini', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Reading the plan…'));
  const bucket = h('input', { type: 'checkbox', id: 'del-bucket', name: 'delete_bucket', dataset: { field: 'delete_bucket' } });
  const keepServers = h('input', {
    type: 'checkbox', id: 'del-keep-servers', name: 'keep_tracking_servers', dataset: { field: 'keep_tracking_servers' },
  });
  const query = () => ({ delete_bucket: bucket.checked, keep_tracking_servers: keepServers.checked });
  const loadPlan = async () => {
    try {
      const { data } = await api.del(`/api/clusters/${api.seg(cluster.name)}`, { query: { dry_run: true, ...query() } });
      replace(planSlot, h('p', {}, 'These steps will run:'),
        h('ol', { class: 'plan-steps compact' }, data.steps.map((s) => h('li', {}, s.title))));
    } catch (err) {
      replace(planSlot, h('p', { class: 'inline-error' }, err.message));
    }
  };
  bucket.addEventListener('change', loadPlan);
  keepServers.addEventListener('change', loadPlan);
  const imported = cluster.source === 'imported';
  const body = [
    h('p', {}, imported
      ? ['The imported cluster ', h('strong', {}, cluster.name), ' is forgotten by InstantStart: only what its import installed (listed below) is removed; the EKS and HyperPod clusters and the bucket stay.']
      : ['This deletes ', h('strong', {}, cluster.name), ' and every AWS resource InstantStart created for it (only resources carrying its ownership tags), including its MLflow tracking servers.']),
    planSlot,
    !imported && h('div', { class: 'field check' }, bucket,
      h('label', { for: 'del-bucket' }, 'Also delete the shared S3 bucket (only if InstantStart created it; its data is lost)')),
    !imported && h('div', { class: 'field check' }, keepServers,
      h('label', { for: 'del-keep-servers' }, 'Keep the MLflow tracking servers created for this cluster (they keep billing; their artifacts stay in the bucket)')),
  ];
  loadPlan();
  const op = await openDialog({
    title: `Delete cluster ${cluster.name}?`,
    body,
    confirmLabel: 'Delete cluster',
    danger: true,
    typeToConfirm: cluster.name,
    onConfirm: async () => {
      const { data } = await api.del(`/api/clusters/${api.seg(cluster.name)}`, {
        query: query(), idempotencyKey: key,
      });
      return data.operation;
    },
  });
  if (op) app.navigate(`#/operations/${encodeURIComponent(op.id)}`);
}

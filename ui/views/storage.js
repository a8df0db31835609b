// Storage tab of a cluster: the shared S3 bucket (mounted in every pod through the Mountpoint
// S3 CSI driver as a static PV/PVC), its mount path and claim status, the top-level listing
// with drill-down into prefixes, "Download a model" (Hugging Face → the bucket, as a cluster
// Job; a gated repository's token comes from a Kubernetes Secret, never typed here) followed
// on the progress panel (into the bucket, or into one of the cluster's FSx volumes), and the
// downloads with their phase; "Delete…" on a download removes
// its Job and pods once its name is typed (the downloaded files stay in the bucket). The FSx for
// Lustre card lists the cluster's file systems (claim fsx-<name>, mount path, lifecycle, type,
// capacity, created or attached), creates one (deployment type, capacity, throughput; the
// server checks every rule and its findings land on the fields) or attaches an existing file
// system by id, optionally linked to a prefix of the shared bucket (a data repository
// association with automatic import and export; the list shows each link), and deletes one once its name is typed (an attached one is only released).

import { h, replace, routeHref, simTimeEl, announce, debounce, errorNotice } from '../lib/dom.js';
import * as api from '../lib/api.js';
import { badge } from '../components/status-badge.js';
import { showFindings, clearFindings, formField, readForm, FINDING_PREFIXES, prune } from '../lib/forms.js';
import { followOperation, refusal } from '../components/plan.js';
import { onCluster, workloadHead, phaseBadge, confirmedDelete } from '../components/workload-page.js';
import { volumeChoice } from '../components/volume-picker.js';

const DELETE_DETAIL = 'Its Job and pods are deleted (a running download stops). The files it already copied stay in the bucket.';
const FSX_DELETE_DETAIL = 'Its claim and volume are deleted, then the file system with all its data. Pods still mounting it lose it.';
const FSX_RELEASE_DETAIL = 'Its claim and volume are deleted; the attached file system and its data stay (InstantStart did not create it). Pods still mounting it lose it.';

function size(bytes) {
  if (bytes === null || bytes === undefined) return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = Number(bytes);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${i ? v.toFixed(1) : v} ${units[i]}`;
}

/** The listing of `prefix` as a table; prefixes are buttons that open them. */
function entriesTable(entries, prefix, open) {
  if (!entries.length) return h('p', { class: 'muted', id: 'storage-empty' }, prefix ? `Nothing under ${prefix}.` : 'The bucket is empty.');
  const sorted = [...entries].sort((a, b) => (a.kind === b.kind ? a.key.localeCompare(b.key) : a.kind === 'prefix' ? -1 : 1));
  return h('div', { class: 'table-wrap' }, h('table', { class: 'table', id: 'storage-table' },
    h('caption', { class: 'visually-hidden' }, `Contents of ${prefix || 'the bucket'}`),
    h('thead', {}, h('tr', {}, ['Name', 'Kind', 'Size'].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, sorted.map((e) => {
      const shortName = prefix && e.key.startsWith(prefix) ? e.key.slice(prefix.length) : e.key;
      return h('tr', { dataset: { key: e.key, kind: e.kind } },
        h('th', { scope: 'row' }, e.kind === 'prefix'
          ? h('button', { type: 'button', class: 'linklike mono', onclick: () => open(e.key), 'aria-label': `Open ${e.key}` },
            h('span', { 'aria-hidden': 'true', class: 'folder-glyph' }, '▸ '), shortName)
          : h('span', { class: 'mono' }, shortName)),
        h('td', {}, e.kind === 'prefix' ? 'folder' : 'object'),
        h('td', { class: 'counts' }, e.kind === 'object' ? size(e.size_bytes) : ''));
    }))));
}

function breadcrumb(prefix, open) {
  const parts = prefix.split('/').filter(Boolean);
  const items = [h('button', { type: 'button', class: 'linklike', onclick: () => open('') }, 'bucket root')];
  let acc = '';
  for (const p of parts) {
    acc += `${p}/`;
    const target = acc;
    items.push(' / ', h('button', { type: 'button', class: 'linklike mono', onclick: () => open(target) }, p));
  }
  return h('p', { class: 'crumbs', id: 'storage-path' }, items);
}

export function storageView({ app, params, query }) {
  const [cluster] = params;
  const speed = app.simSpeed();
  const base = `/api/clusters/${api.seg(cluster)}`;
  const errorBox = h('div', {});
  const info = h('div', { class: 'storage-info', 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Reading the shared storage…'));
  const pathSlot = h('div', {});
  const listSlot = h('div', { 'aria-live': 'polite' });
  const downloadsSlot = h('div', {}, h('p', { class: 'muted' }, 'Reading the downloads…'));
  const activity = h('div', { class: 'activity-slot', id: 'download-activity' });
  const fsxSlot = h('div', { id: 'fsx-volumes' }, h('p', { class: 'muted' }, 'Reading the FSx for Lustre volumes…'));
  const fsxActivity = h('div', { class: 'activity-slot', id: 'fsx-activity' });
  let prefix = query.get('prefix') || '';
  let disposed = false;
  let pollTimer = null;

  async function loadStorage() {
    try {
      const storages = await api.get(`${base}/storage`);
      if (disposed) return;
      replace(errorBox);
      const buckets = storages.filter((s) => (s.kind || 's3') === 's3');
      renderInfo(buckets);
      renderFsx(storages.filter((s) => s.kind === 'fsx_lustre'));
      destinationVolume.render(storages.filter((s) => s.kind === 'fsx_lustre'));
      if (!prefix) {
        const s = buckets[0];
        replace(pathSlot, breadcrumb('', openPrefix));
        replace(listSlot, s ? entriesTable(s.entries || [], '', openPrefix) : '');
      } else {
        await openPrefix(prefix, { focus: false });
      }
    } catch (err) {
      if (err.status === 401) return;
      replace(errorBox, errorNotice(err, 'cluster'));
      replace(info);
    } finally {
      info.removeAttribute('aria-busy');
    }
  }

  function renderInfo(storages) {
    if (!storages.length) {
      replace(info, h('p', { class: 'notice warn' }, 'No shared storage is set up on this cluster yet (the create pipeline’s storage step makes it).'));
      return;
    }
    replace(info, storages.map((s) => h('dl', { class: 'props', dataset: { storage: s.name } },
      h('dt', {}, 'Name'), h('dd', { class: 'mono' }, s.name),
      h('dt', {}, 'Bucket'), h('dd', { class: 'mono', id: 'storage-bucket' }, s.bucket),
      h('dt', {}, 'Mount path'), h('dd', { class: 'mono', id: 'storage-mount' }, s.mount_path),
      h('dt', {}, 'Claim'), h('dd', { class: 'mono' }, s.claim || '—'),
      h('dt', {}, 'Status'), h('dd', { id: 'storage-status' }, badge(s.status || 'unknown', /^(bound|available|ready)$/i.test(s.status || '') ? 'ok' : null)))));
  }

  function renderFsx(volumes) {
    if (!volumes.length) {
      replace(fsxSlot, h('p', { class: 'muted', id: 'fsx-empty' }, 'No FSx for Lustre volumes on this cluster.'));
      return;
    }
    replace(fsxSlot, h('div', { class: 'table-wrap' }, h('table', { class: 'table', id: 'fsx-table' },
      h('caption', { class: 'visually-hidden' }, 'FSx for Lustre volumes'),
      h('thead', {}, h('tr', {}, ['Volume', 'File system', 'Type', 'Capacity', 'Mount path', 'Linked to', 'Claim', ''].map((t) => h('th', { scope: 'col' }, t || h('span', { class: 'visually-hidden' }, 'Actions'))))),
      h('tbody', {}, volumes.map((v) => {
        const fs = v.file_system || {};
        const attached = v.ownership === 'attached';
        return h('tr', { dataset: { fsx: v.name, lifecycle: fs.lifecycle || '', ownership: v.ownership || '' } },
          h('th', { scope: 'row', class: 'mono' }, v.name),
          h('td', {}, h('span', { class: 'mono' }, fs.id || '—'), ' ', badge(fs.lifecycle || 'unknown', fs.lifecycle === 'AVAILABLE' ? 'ok' : null),
            attached ? [' ', h('span', { class: 'fsx-ownership' }, badge('attached', null))] : ''),
          h('td', {}, fs.deployment_type || '—', fs.per_unit_storage_throughput ? ` · ${fs.per_unit_storage_throughput} MB/s/TiB` : '',
            fs.file_system_type_version ? ` · Lustre ${fs.file_system_type_version}` : ''),
          h('td', { class: 'counts' }, fs.storage_capacity_gib ? `${fs.storage_capacity_gib} GiB` : '—'),
          h('td', { class: 'mono' }, v.mount_path),
          h('td', { class: 'fsx-links' }, (v.data_repositories || []).length ? v.data_repositories.map((d) => h('div', { dataset: { link: d.file_system_path } },
            h('span', { class: 'mono' }, `${d.file_system_path} ↔ ${d.data_repository_path}`), ' ', badge(d.lifecycle || 'unknown', d.lifecycle === 'AVAILABLE' ? 'ok' : null),
            h('div', { class: 'muted' }, `import ${(d.import_events || []).join(', ') || 'none'} · export ${(d.export_events || []).join(', ') || 'none'}`))) : '—'),
          h('td', {}, h('span', { class: 'mono' }, v.claim), ' ', badge(v.status || 'unknown', /^bound$/i.test(v.status || '') ? 'ok' : null)),
          h('td', { class: 'actions-cell' }, h('button', {
            type: 'button', class: 'btn small danger-outline', 'aria-label': `Delete FSx volume ${v.name}…`,
            onclick: () => deleteFsx(v.name, attached),
          }, 'Delete…')));
      })))));
  }

  async function deleteFsx(name, attached) {
    const op = await confirmedDelete({ what: 'FSx volume', name, detail: attached ? FSX_RELEASE_DETAIL : FSX_DELETE_DETAIL, path: `${base}/storage/fsx/${api.seg(name)}`, activity: fsxActivity });
    if (op) followOperation(fsxActivity, op, { title: `Delete FSx volume ${name}`, speed, onSettled: () => loadStorage() });
  }

  async function openPrefix(p, { focus = true } = {}) {
    prefix = p;
    const hash = p ? `${routeHref('clusters', cluster, 'storage')}?prefix=${encodeURIComponent(p)}` : routeHref('clusters', cluster, 'storage');
    history.replaceState(null, '', hash);
    replace(pathSlot, breadcrumb(p, openPrefix));
    try {
      const data = p ? await api.get(`${base}/storage/objects`, { query: { prefix: p } })
        : { entries: (await api.get(`${base}/storage`)).find((s) => (s.kind || 's3') === 's3')?.entries || [] };
      if (disposed) return;
      showEntries(data.entries || [], p, data.next_cursor);
      if (focus) {
        const first = listSlot.querySelector('button, th span') || pathSlot;
        announce(`${p || 'bucket root'}: ${(data.entries || []).length} entries`);
        if (first.matches('button')) first.focus();
      }
    } catch (err) {
      if (err.status === 401) return;
      replace(listSlot, errorNotice(err, 'prefix'));
    }
  }

  /** The listing of prefix `p` so far, with "Load more" while a page's `next_cursor` says more follow. */
  function showEntries(entries, p, nextCursor) {
    const more = nextCursor && h('button', {
      type: 'button', class: 'btn small', id: 'storage-more',
      onclick: async (e) => {
        e.target.disabled = true;
        try {
          const page = await api.get(`${base}/storage/objects`, { query: { prefix: p, cursor: nextCursor } });
          if (disposed || prefix !== p) return;
          showEntries(entries.concat(page.entries || []), p, page.next_cursor);
          announce(`${(page.entries || []).length} more entries`);
        } catch (err) {
          if (err.status === 401) return;
          e.target.disabled = false;
          replace(listSlot, errorNotice(err, 'cursor'));
        }
      },
    }, 'Load more');
    replace(listSlot, h('div', {}, entriesTable(entries, p, openPrefix),
      more && h('p', { class: 'muted' }, `${entries.length} entries shown; more follow. `, more)));
  }

  async function loadDownloads() {
    clearTimeout(pollTimer);
    try {
      const list = await api.list(`${base}/downloads`);
      if (disposed) return;
      replace(downloadsSlot, list.length
        ? h('div', { class: 'table-wrap' }, h('table', { class: 'table', id: 'downloads-table' },
          h('caption', { class: 'visually-hidden' }, 'Model downloads'),
          h('thead', {}, h('tr', {}, ['Job', 'Repository', 'Destination', 'Phase', 'Started', 'Completed', ''].map((t) => h('th', { scope: 'col' }, t || h('span', { class: 'visually-hidden' }, 'Actions'))))),
          h('tbody', {}, list.map((d) => h('tr', { dataset: { download: d.name, phase: d.phase } },
            h('th', { scope: 'row', class: 'mono' }, d.name),
            h('td', { class: 'mono' }, d.repo_id),
            h('td', { class: 'mono' }, d.destination),
            h('td', {}, phaseBadge(d.phase), d.message && h('div', { class: 'help' }, d.message)),
            h('td', { class: 'nowrap' }, simTimeEl(d.started_at)),
            h('td', { class: 'nowrap' }, simTimeEl(d.completed_at)),
            h('td', { class: 'actions-cell' }, h('button', {
              type: 'button', class: 'btn small danger-outline', 'aria-label': `Delete download ${d.name}…`,
              onclick: () => deleteDownload(d.name),
            }, 'Delete…')))))))
        : h('p', { class: 'muted' }, 'No model downloads on this cluster.'));
      if (list.some((d) => !/succeeded|failed|complete/i.test(d.phase)) && !document.hidden) pollTimer = setTimeout(loadDownloads, 2000);
    } catch (err) {
      if (err.status === 401) return;
      replace(downloadsSlot, errorNotice(err, 'cluster'));
    }
  }

  async function deleteDownload(name) {
    const op = await confirmedDelete({ what: 'download', name, detail: DELETE_DETAIL, path: `${base}/downloads/${api.seg(name)}`, activity });
    if (op) followOperation(activity, op, { title: `Delete download ${name}`, speed, onSettled: () => loadDownloads() });
  }

  // ---- download form ------------------------------------------------------------------------

  const key = { value: api.newIdempotencyKey() };
  const tokenToggle = formField('hf_token.enabled', 'The repository is gated or private: read a Hugging Face token from a Kubernetes Secret', {
    kind: 'checkbox',
    help: 'The Job reads the token from the Secret at run time. The token itself is never sent to or stored by InstantStart.',
  });
  const tokenFields = h('div', { class: 'grid-2', hidden: true },
    formField('hf_token.name', 'Secret name', { value: 'hf-token', mono: true }),
    formField('hf_token.key', 'Key in the Secret', { value: 'token', mono: true }));
  tokenToggle.querySelector('input').addEventListener('change', (e) => { tokenFields.hidden = !e.target.checked; });
  const destinationField = formField('destination', 'Destination in the bucket (optional)', { placeholder: 'models/<repository>', mono: true, help: 'models/<repository> (or datasets/…) when empty.' });
  const destinationVolume = volumeChoice(cluster, {
    field: 'volume',
    label: 'Download into',
    none: 'The shared bucket',
    empty: () => h('p', { class: 'muted volumes-empty' }, 'Into the shared bucket: this cluster has no FSx for Lustre volume (the FSx card above creates one).'),
    help: 'An FSx volume is mounted at /fsx/<name> in the Job; the files land there instead of the bucket.',
    onChange: (name) => {
      destinationField.querySelector('label').textContent = name ? `Path in volume ${name} (optional)` : 'Destination in the bucket (optional)';
    },
  });
  const submitBtn = h('button', { type: 'submit', class: 'btn primary', id: 'download-submit' }, 'Download');
  const form = h('form', { class: 'editor-form', id: 'download-form', novalidate: true },
    h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' }),
    h('div', { class: 'grid-3' },
      formField('repo_id', 'Hugging Face repository', { placeholder: 'Qwen/Qwen3-0.6B', mono: true, help: 'owner/name of a model or dataset.' }),
      formField('revision', 'Revision (optional)', { placeholder: 'main', mono: true, help: 'Branch, tag or commit; the default branch when empty.' }),
      formField('repo_type', 'Kind', { kind: 'select', options: [['model', 'Model'], ['dataset', 'Dataset']], value: 'model' })),
    h('div', { class: 'grid-3' },
      destinationVolume.el,
      destinationField,
      formField('namespace', 'Namespace', { value: 'default', mono: true, help: 'Where the Job runs (and the Secret and the shared claim live).' })),
    tokenToggle, tokenFields,
    h('div', { class: 'form-actions' }, submitBtn));
  form.addEventListener('input', () => { key.value = api.newIdempotencyKey(); });
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearFindings(form);
    const v = readForm(form);
    const body = prune({
      namespace: v.namespace,
      repo_id: v.repo_id,
      repo_type: v.repo_type,
      revision: v.revision,
      destination: v.destination,
      volume: destinationVolume.value(),
      hf_token: v['hf_token.enabled'] ? { name: v['hf_token.name'], key: v['hf_token.key'] } : undefined,
    }) || {};
    submitBtn.disabled = true;
    submitBtn.setAttribute('aria-busy', 'true');
    try {
      const { data } = await api.post(`${base}/downloads`, body, { idempotencyKey: key.value });
      key.value = api.newIdempotencyKey();
      const job = data.workload ? data.workload.name : body.repo_id;
      followOperation(activity, data.operation, {
        title: `Download ${body.repo_id} → job ${job}`,
        speed,
        onSettled: () => { loadDownloads(); loadStorage(); },
      });
      loadDownloads();
    } catch (err) {
      if (err.status === 401) return;
      if (err.findings.length || err.status === 400 || err.status === 422) showFindings(form, err, { prefixes: FINDING_PREFIXES });
      else replace(activity, refusal(err));
    } finally {
      submitBtn.disabled = false;
      submitBtn.removeAttribute('aria-busy');
    }
  });

  // ---- FSx for Lustre form -------------------------------------------------------------------

  const fsxKey = { value: api.newIdempotencyKey() };
  const fsxSubmit = h('button', { type: 'submit', class: 'btn primary', id: 'fsx-submit' }, 'Create volume');
  const fsxForm = h('form', { class: 'editor-form', id: 'fsx-form', novalidate: true },
    h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' }),
    h('div', { class: 'grid-3' },
      formField('name', 'Volume name', { placeholder: 'scratch', mono: true, help: 'Pods mount claim fsx-<name> at /fsx/<name>.' }),
      formField('deployment_type', 'Deployment type', {
        kind: 'select', value: 'SCRATCH_2',
        options: [['SCRATCH_2', 'Scratch 2 (temporary, not replicated)'], ['PERSISTENT_2', 'Persistent 2 (replicated in the AZ)']],
      }),
      formField('storage_capacity_gib', 'Capacity (GiB)', { kind: 'number', value: '1200', help: '1200, 2400 or a multiple of 2400.' })),
    h('div', { class: 'grid-3' },
      formField('per_unit_storage_throughput', 'Throughput (MB/s per TiB)', {
        kind: 'select', value: '',
        options: [['', 'None (Scratch 2)'], ['125', '125'], ['250', '250'], ['500', '500'], ['1000', '1000']],
        help: 'Persistent 2 only.',
      }),
      formField('file_system_id', 'Or attach an existing file system', {
        placeholder: 'fs-0123456789abcdef0', mono: true,
        help: 'Optional. An AVAILABLE file system in the cluster’s VPC: its type and capacity are its own, and it is released, never deleted.',
      })),
    h('div', { class: 'grid-3' },
      formField('data_repository', 'Link to the shared bucket', { kind: 'checkbox', help: 'A data repository association: bucket changes are imported, file system changes exported.' }),
      formField('data_repository.bucket_prefix', 'Bucket prefix', { placeholder: 'datasets/', mono: true, help: 'Empty: the whole bucket.' }),
      formField('data_repository.file_system_path', 'Directory on the file system', { placeholder: '/datasets', mono: true, help: 'Starts with /; default /.' })),
    h('div', { class: 'form-actions' }, fsxSubmit));
  fsxForm.addEventListener('input', () => { fsxKey.value = api.newIdempotencyKey(); });
  fsxForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearFindings(fsxForm);
    const v = readForm(fsxForm);
    const capacity = Number(v.storage_capacity_gib);
    const body = v.file_system_id ? { name: v.name, file_system_id: v.file_system_id } : prune({
      name: v.name,
      deployment_type: v.deployment_type,
      // Sent as typed when it is not a number: the server names the field.
      storage_capacity_gib: v.storage_capacity_gib === '' ? undefined : (Number.isFinite(capacity) ? capacity : v.storage_capacity_gib),
      per_unit_storage_throughput: v.per_unit_storage_throughput ? Number(v.per_unit_storage_throughput) : undefined,
      data_repository: v.data_repository ? {
        bucket_prefix: v['data_repository.bucket_prefix'] || '',
        ...(v['data_repository.file_system_path'] ? { file_system_path: v['data_repository.file_system_path'] } : {}),
      } : undefined,
    }) || {};
    fsxSubmit.disabled = true;
    fsxSubmit.setAttribute('aria-busy', 'true');
    try {
      const { data } = await api.post(`${base}/storage/fsx`, body, { idempotencyKey: fsxKey.value });
      fsxKey.value = api.newIdempotencyKey();
      followOperation(fsxActivity, data.operation, { title: `FSx volume ${body.name}`, speed, onSettled: () => loadStorage() });
    } catch (err) {
      if (err.status === 401) return;
      if (err.findings.length || err.status === 400 || err.status === 422) showFindings(fsxForm, err, { prefixes: FINDING_PREFIXES });
      else replace(fsxActivity, refusal(err));
    } finally {
      fsxSubmit.disabled = false;
      fsxSubmit.removeAttribute('aria-busy');
    }
  });

  const refreshBtn = h('button', { type: 'button', class: 'btn', id: 'refresh-storage', onclick: () => { loadStorage(); loadDownloads(); announce('Storage refreshed'); } }, 'Refresh');
  const el = h('section', { class: 'view' },
    workloadHead(cluster, 'storage', 'Storage', refreshBtn),
    h('p', { class: 'lede muted' }, 'One S3 bucket, mounted at the same path in every pod. Models, datasets and checkpoints live here.'),
    errorBox,
    h('section', { class: 'card', 'aria-labelledby': 'st-title' }, h('h2', { id: 'st-title' }, 'Shared bucket'), info),
    h('section', { class: 'card', 'aria-labelledby': 'ls-title' }, h('h2', { id: 'ls-title' }, 'Contents'), pathSlot, listSlot),
    h('section', { class: 'card', 'aria-labelledby': 'fsx-title' }, h('h2', { id: 'fsx-title' }, 'FSx for Lustre volumes'),
      h('p', { class: 'muted' }, 'High-throughput file systems in the nodes’ subnet, mounted beside the bucket: pods mount claim fsx-<name> at /fsx/<name>.'),
      fsxSlot, fsxForm, fsxActivity),
    h('section', { class: 'card', 'aria-labelledby': 'dl-title' }, h('h2', { id: 'dl-title' }, 'Download a model'),
      h('p', { class: 'muted' }, 'Runs a Job on the cluster that copies a Hugging Face repository into the bucket, or into one of its FSx volumes.'),
      form, activity),
    h('section', { class: 'card', 'aria-labelledby': 'dls-title' }, h('h2', { id: 'dls-title' }, 'Downloads'), downloadsSlot));

  const reload = debounce(loadDownloads, 300);
  const reloadStorage = debounce(loadStorage, 300);
  const stream = new api.OperationStream({
    onOperation: (op) => {
      if (/download/.test(op.kind) && onCluster(op, cluster)) reload();
      if (/file_system/.test(op.kind) && onCluster(op, cluster)) reloadStorage();
    },
  }).start();
  loadStorage();
  loadDownloads();
  return {
    el,
    title: `Storage · ${cluster}`,
    dispose() {
      disposed = true;
      clearTimeout(pollTimer);
      reload.cancel();
      reloadStorage.cancel();
      stream.stop();
    },
  };
}


// API tokens (admin only): list them, mint one (its secret is shown once, here), revoke one.
// Revoking ends the token and every browser session minted from it at once. A token may be bound
// to a Kubernetes user (with groups and namespaces, for one cluster or all): its workload calls
// then act as that user, so the cluster's RBAC decides. Other tokens see the server's 403
// explained.

import { h, replace, timeEl, announce } from '../lib/dom.js';
import * as api from '../lib/api.js';

export function tokensView() {
  const listSlot = h('div', { 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Loading tokens…'));
  const errorBox = h('div', { class: 'notice bad', id: 'token-error', role: 'alert', hidden: true });
  const secretBox = h('div', { class: 'notice', id: 'token-secret', role: 'status', hidden: true });
  const name = h('input', { id: 'token-name', name: 'name', required: true, maxlength: 64, pattern: '[A-Za-z0-9_\\-]{1,64}', autocomplete: 'off' });
  const scope = h('select', { id: 'token-scope', name: 'scope' },
    h('option', { value: 'read' }, 'read — GET requests and live streams'),
    h('option', { value: 'workloads' }, 'workloads — read, and submit or delete jobs, downloads and endpoints'),
    h('option', { value: 'operate' }, 'operate — everything'));
  const expires = h('input', { id: 'token-expires', name: 'expires_at', type: 'datetime-local' });
  const kubeUser = h('input', { id: 'token-kube-user', name: 'kube_user', maxlength: 253, autocomplete: 'off' });
  const kubeGroups = h('input', { id: 'token-kube-groups', name: 'kube_groups', autocomplete: 'off', placeholder: 'team-a, ml' });
  const kubeNamespaces = h('input', { id: 'token-kube-namespaces', name: 'kube_namespaces', autocomplete: 'off', placeholder: 'team-a' });
  const kubeCluster = h('input', { id: 'token-kube-cluster', name: 'kube_cluster', autocomplete: 'off', value: '*' });
  const kubeSystem = h('input', { id: 'token-kube-system-namespaces', name: 'kube_system_namespaces', autocomplete: 'off', placeholder: 'none' });
  const kubeAccounts = h('input', { id: 'token-kube-service-accounts', name: 'kube_service_accounts', autocomplete: 'off', placeholder: 'any of the namespace' });
  const words = (s) => s.split(',').map((x) => x.trim()).filter(Boolean);

  function bindingText(b) {
    const groups = b.groups.length ? ` (${b.groups.join(', ')})` : '';
    const system = (b.system_namespaces || []).length ? ` + system ${b.system_namespaces.join(', ')}` : '';
    const accounts = (b.service_accounts || []).length ? `, service accounts ${b.service_accounts.join(', ')}` : '';
    return `${b.cluster}: ${b.user}${groups} in ${b.namespaces.join(', ')}${system}${accounts}`;
  }

  function showError(err) {
    errorBox.hidden = false;
    const findings = (err.problem && err.problem.findings) || [];
    replace(errorBox, h('strong', {}, `${err.title}. `), err.message,
      findings.length ? h('ul', {}, findings.map((f) => h('li', {}, h('span', { class: 'mono' }, f.field), ': ', f.rule))) : null);
  }

  async function load() {
    try {
      const tokens = await api.list('/api/tokens');
      listSlot.removeAttribute('aria-busy');
      if (!tokens.length) {
        replace(listSlot, h('p', { class: 'muted' }, 'No tokens besides the admin token.'));
        return;
      }
      replace(listSlot, h('div', { class: 'table-wrap' }, h('table', { class: 'table', id: 'tokens-table' },
        h('caption', { class: 'visually-hidden' }, 'API tokens'),
        h('thead', {}, h('tr', {}, ['Name', 'Scope', 'Kubernetes identity', 'Expires', 'Created', 'By', ''].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, tokens.map((t) => h('tr', { dataset: { token: t.name, active: String(t.active) } },
          h('th', { scope: 'row', class: 'mono' }, t.name),
          h('td', {}, t.scope),
          h('td', { class: 'kube-bindings' }, (t.kube_bindings || []).length
            ? t.kube_bindings.map((b) => h('div', { class: 'mono' }, bindingText(b)))
            : h('span', { class: 'muted' }, 'unbound')),
          h('td', { class: 'nowrap' }, t.expires_at ? timeEl(t.expires_at) : h('span', { class: 'muted' }, 'never'),
            t.active ? null : h('span', { class: 'muted' }, ' (expired)')),
          h('td', { class: 'nowrap' }, timeEl(t.created_at)),
          h('td', { class: 'mono' }, t.created_by),
          h('td', {}, h('button', {
            type: 'button', class: 'btn danger small', 'aria-label': `Revoke token ${t.name}`,
            onclick: () => revoke(t.name),
          }, 'Revoke'))))))));
    } catch (err) {
      if (err.status === 401) return;
      listSlot.removeAttribute('aria-busy');
      replace(listSlot);
      showError(err);
    }
  }

  async function revoke(tokenName) {
    if (!window.confirm(`Revoke token ${tokenName}? It and every browser session opened with it stop working at once.`)) return;
    errorBox.hidden = true;
    try {
      await api.del(`/api/tokens/${encodeURIComponent(tokenName)}`);
      announce(`Token ${tokenName} revoked`);
      load();
    } catch (err) {
      showError(err);
    }
  }

  async function create(ev) {
    ev.preventDefault();
    errorBox.hidden = true;
    secretBox.hidden = true;
    const body = { name: name.value.trim(), scope: scope.value };
    if (expires.value) body.expires_at = new Date(expires.value).toISOString();
    if (kubeUser.value.trim()) {
      body.kube_bindings = [{
        cluster: kubeCluster.value.trim() || '*',
        user: kubeUser.value.trim(),
        groups: words(kubeGroups.value),
        namespaces: words(kubeNamespaces.value),
        system_namespaces: words(kubeSystem.value),
        service_accounts: words(kubeAccounts.value),
      }];
    }
    try {
      const { data } = await api.post('/api/tokens', body);
      secretBox.hidden = false;
      replace(secretBox,
        h('p', {}, h('strong', {}, `Token ${data.name} created. `), 'Copy it now: it is shown only this once.'),
        h('pre', { class: 'mono', id: 'token-secret-value' }, data.token));
      form.reset();
      load();
    } catch (err) {
      showError(err);
    }
  }

  const form = h('form', { id: 'token-form', class: 'token-form', onsubmit: create },
    h('div', { class: 'field' }, h('label', { for: 'token-name' }, 'Name'), name,
      h('p', { class: 'hint muted' }, 'Letters, digits, - and _. It names the token in the audit log.')),
    h('div', { class: 'field' }, h('label', { for: 'token-scope' }, 'Scope'), scope),
    h('div', { class: 'field' }, h('label', { for: 'token-expires' }, 'Expires (optional)'), expires),
    h('fieldset', { class: 'field' }, h('legend', {}, 'Kubernetes identity (optional)'),
      h('p', { class: 'hint muted' }, 'Workloads, pod and log reads and chat made with this token act as this user, so the cluster\'s RBAC decides. Without one, the token may use the default namespace only.'),
      h('div', { class: 'field' }, h('label', { for: 'token-kube-user' }, 'User'), kubeUser),
      h('div', { class: 'field' }, h('label', { for: 'token-kube-groups' }, 'Groups (comma-separated)'), kubeGroups),
      h('div', { class: 'field' }, h('label', { for: 'token-kube-namespaces' }, 'Namespaces (comma-separated)'), kubeNamespaces),
      h('div', { class: 'field' }, h('label', { for: 'token-kube-system-namespaces' }, 'System namespaces it may also use (kube-system, an operator\'s; comma-separated)'), kubeSystem),
      h('div', { class: 'field' }, h('label', { for: 'token-kube-service-accounts' }, 'Service accounts its workloads may name (comma-separated; empty = any)'), kubeAccounts),
      h('div', { class: 'field' }, h('label', { for: 'token-kube-cluster' }, 'Cluster (* = every cluster)'), kubeCluster)),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'btn primary' }, 'Create token')));

  load();
  const el = h('section', { class: 'view' },
    h('div', { class: 'view-head' }, h('h1', {}, 'API tokens')),
    h('p', { class: 'lede muted' }, 'Tokens for the CLI, agents and scripts. Only the admin token can manage them; the MCP tools cannot.'),
    errorBox,
    secretBox,
    h('section', { class: 'card', 'aria-labelledby': 'token-new-title' },
      h('h2', { id: 'token-new-title' }, 'New token'), form),
    h('section', { class: 'card', 'aria-labelledby': 'tokens-title' },
      h('h2', { id: 'tokens-title' }, 'Tokens'), listSlot));
  return { el, title: 'API tokens' };
}

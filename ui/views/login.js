// Login: paste the API token once; the server answers with an HttpOnly session cookie and a
// CSRF token (kept in this tab's sessionStorage). The token itself is not stored.

import { h } from '../lib/dom.js';
import * as api from '../lib/api.js';
import { showFindings, clearFindings } from '../lib/forms.js';

export function loginView({ app }) {
  const reason = sessionStorage.getItem('instantstart.loginReason');
  sessionStorage.removeItem('instantstart.loginReason');
  const input = h('input', {
    id: 'token', name: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false',
    required: true, 'aria-describedby': 'token-help', dataset: { field: 'token' },
  });
  const button = h('button', { type: 'submit', class: 'btn primary wide' }, 'Log in');
  const form = h('form', { class: 'login-form', novalidate: true },
    h('div', { class: 'error-summary', tabindex: '-1', hidden: true, role: 'alert' }),
    h('div', { class: 'field' },
      h('label', { for: 'token' }, 'API token'),
      input,
      h('p', { class: 'help', id: 'token-help' },
        'Printed by the server on first start and saved in ', h('code', {}, '<data-dir>/token'),
        '. It is exchanged for a session cookie and not kept by the browser.')),
    button);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearFindings(form);
    const token = input.value.trim();
    if (!token) {
      showFindings(form, new api.ApiError(400, { title: 'Token required', findings: [{ field: 'token', rule: 'paste the API token' }] }));
      return;
    }
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
    try {
      await api.login(token);
      input.value = '';
      app.continueAfterLogin();
    } catch (err) {
      const rule = err.status === 401 ? 'this token is not valid for this control plane' : err.message;
      showFindings(form, new api.ApiError(err.status, { title: err.title, findings: [{ field: 'token', rule }] }));
      input.select();
    } finally {
      button.disabled = false;
      button.removeAttribute('aria-busy');
    }
  });
  const el = h('section', { class: 'login' },
    h('div', { class: 'login-card card' },
      h('p', { class: 'brand big' }, h('span', { class: 'brand-mark', 'aria-hidden': 'true' }, '◆'), 'InstantStart'),
      h('h1', {}, 'Log in'),
      h('p', { class: 'muted' }, 'Control plane for Amazon SageMaker HyperPod on Amazon EKS.'),
      reason && h('p', { class: 'notice warn', role: 'status' }, reason),
      form));
  return { el, title: 'Log in', focus: input };
}

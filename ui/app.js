// InstantStart web UI: the shell (top bar, theme), the hash router and the session handling.
// Plain ES modules, no build step; every view is a function returning {el, title, dispose}.

import { h, replace, setSimClock } from './lib/dom.js';
import * as api from './lib/api.js';
import { loginView } from './views/login.js';
import { clustersView } from './views/clusters.js';
import { createView, addHyperPodView } from './views/create.js';
import { clusterView } from './views/cluster.js';
import { operationView } from './views/operation.js';
import { operationsView } from './views/operations.js';
import { tokensView } from './views/tokens.js';
import { storageView } from './views/storage.js';
import { jobsView, jobNewView, jobView } from './views/jobs.js';
import { endpointsView, endpointNewView, endpointView } from './views/endpoints.js';
import { activeClusterView } from './components/workload-page.js';
import { historyView } from './views/history.js';
import { capacityView } from './views/capacity.js';
import './components/status-badge.js';
import './components/operation-progress.js';
import './components/features-panel.js';

const NEXT_KEY = 'instantstart.next';
const THEME_KEY = 'instantstart.theme';

/** Shared state and services for the views. */
export const app = {
  context: null,
  continueAfterLogin: () => continueAfterLogin(),
  async refreshContext() {
    try {
      app.context = await api.get('/api/context');
    } catch {
      /* the header shows what it knows */
    }
    renderTopbar();
    return app.context;
  },
  /** Speed factor of the simulated cloud, or null on real AWS. */
  simSpeed() {
    return app.context && app.context.provider === 'sim' ? app.context.sim_speed : null;
  },
  /** Whether the UI has a route for `path` (e.g. '/history'): views link optional screens. */
  hasRoute(path) {
    return ROUTES.some((r) => r.re.test(path));
  },
  navigate(hash, { replace: rep = false } = {}) {
    if (rep) location.replace(hash);
    else location.hash = hash;
  },
};

const ROUTES = [
  { re: /^\/login$/, view: loginView, public: true },
  { re: /^\/clusters\/new$/, view: createView, nav: 'new' },
  { re: /^\/clusters\/([^/]+)\/hyperpod$/, view: addHyperPodView, nav: 'clusters' },
  { re: /^\/clusters\/([^/]+)\/storage$/, view: storageView, nav: 'storage' },
  { re: /^\/clusters\/([^/]+)\/jobs\/new$/, view: jobNewView, nav: 'jobs' },
  { re: /^\/clusters\/([^/]+)\/jobs\/([^/]+)$/, view: jobView, nav: 'jobs' },
  { re: /^\/clusters\/([^/]+)\/jobs$/, view: jobsView, nav: 'jobs' },
  { re: /^\/clusters\/([^/]+)\/endpoints\/new$/, view: endpointNewView, nav: 'endpoints' },
  { re: /^\/clusters\/([^/]+)\/endpoints\/([^/]+)$/, view: endpointView, nav: 'endpoints' },
  { re: /^\/clusters\/([^/]+)\/endpoints$/, view: endpointsView, nav: 'endpoints' },
  { re: /^\/storage$/, view: activeClusterView('storage', 'Storage'), nav: 'storage' },
  { re: /^\/jobs$/, view: activeClusterView('jobs', 'Training jobs'), nav: 'jobs' },
  { re: /^\/endpoints$/, view: activeClusterView('endpoints', 'Endpoints'), nav: 'endpoints' },
  { re: /^\/clusters\/([^/]+)$/, view: clusterView, nav: 'clusters' },
  { re: /^\/clusters$/, view: clustersView, nav: 'clusters' },
  { re: /^\/history$/, view: historyView, nav: 'history' },
  { re: /^\/capacity$/, view: capacityView, nav: 'new' },
  { re: /^\/operations\/([^/]+)$/, view: operationView, nav: 'operations' },
  { re: /^\/operations$/, view: operationsView, nav: 'operations' },
  { re: /^\/tokens$/, view: tokensView, nav: 'tokens' },
];

// ---- theme ---------------------------------------------------------------------------------

function systemDark() {
  return window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches;
}

function effectiveTheme() {
  return localStorage.getItem(THEME_KEY) || (systemDark() ? 'dark' : 'light');
}

function applyTheme() {
  const chosen = localStorage.getItem(THEME_KEY);
  if (chosen) document.documentElement.dataset.theme = chosen;
  else delete document.documentElement.dataset.theme;
  const btn = document.getElementById('theme-toggle');
  if (btn) {
    const dark = effectiveTheme() === 'dark';
    btn.setAttribute('aria-pressed', String(dark));
    btn.title = chosen ? `Theme: ${chosen} (chosen). Shift-click to follow the system.` : 'Theme: follows the system';
  }
}

function toggleTheme(e) {
  if (e && e.shiftKey) localStorage.removeItem(THEME_KEY);
  else localStorage.setItem(THEME_KEY, effectiveTheme() === 'dark' ? 'light' : 'dark');
  applyTheme();
}

// ---- top bar -------------------------------------------------------------------------------

let currentNav = null;

function renderTopbar() {
  // Times read from the cloud are marked "sim" on the simulated cloud (see dom.js simTimeEl).
  setSimClock(app.simSpeed());
  const bar = document.getElementById('topbar');
  if (!bar) return;
  const ctx = app.context;
  const who = api.sessionUser();
  const link = (href, key, text) => h('a', { href, 'aria-current': currentNav === key ? 'page' : null }, text);
  const env = ctx
    ? (ctx.provider === 'sim'
      ? h('span', { class: 'env sim', title: 'No AWS account is used: the control plane drives its simulated cloud' }, `Simulated cloud · ${ctx.sim_speed}×`)
      : h('span', { class: 'env aws', title: ctx.identity ? ctx.identity.arn : ctx.identity_error || '' },
        `AWS ${ctx.identity ? ctx.identity.account : ''}`))
    : null;
  const active = ctx && ctx.active_cluster
    ? h('a', { class: 'active-chip', href: `#/clusters/${encodeURIComponent(ctx.active_cluster)}`, title: 'The active cluster' },
      h('span', { 'aria-hidden': 'true' }, '★ '), h('span', { class: 'visually-hidden' }, 'Active cluster: '), ctx.active_cluster)
    : null;
  replace(bar,
    h('a', { class: 'brand', href: '#/clusters' }, h('span', { class: 'brand-mark', 'aria-hidden': 'true' }, '◆'), 'InstantStart'),
    h('nav', { 'aria-label': 'Main' },
      link('#/clusters', 'clusters', 'Clusters'),
      link('#/clusters/new', 'new', 'Create cluster'),
      link('#/storage', 'storage', 'Storage'),
      link('#/jobs', 'jobs', 'Jobs'),
      link('#/endpoints', 'endpoints', 'Endpoints'),
      link('#/history', 'history', 'Training history'),
      link('#/operations', 'operations', 'Operations'),
      who && who.name === 'admin' && link('#/tokens', 'tokens', 'Tokens')),
    h('div', { class: 'topbar-right' },
      env,
      active,
      who && h('span', { class: 'who muted', title: `Token ${who.name}, scope ${who.scope}` }, who.name),
      h('button', { type: 'button', id: 'theme-toggle', class: 'btn ghost', onclick: toggleTheme, 'aria-label': 'Dark theme' },
        h('span', { 'aria-hidden': 'true', class: 'theme-icon' })),
      h('button', { type: 'button', class: 'btn ghost', onclick: doLogout }, 'Log out')));
  applyTheme();
}

async function doLogout() {
  await api.logout().catch(() => {});
  app.context = null;
  app.navigate('#/login');
}

// ---- router --------------------------------------------------------------------------------

let current = null;
let seq = 0;

function parseHash() {
  const raw = location.hash.replace(/^#/, '');
  const [path, query = ''] = raw.split('?');
  return { path: path || '/clusters', query: new URLSearchParams(query) };
}

async function route() {
  const mySeq = ++seq;
  const { path, query } = parseHash();
  const match = ROUTES.map((r) => ({ r, m: r.re.exec(path) })).find((x) => x.m);
  if (!match) {
    app.navigate('#/clusters', { replace: true });
    return;
  }
  if (!match.r.public && !api.hasSession()) {
    sessionStorage.setItem(NEXT_KEY, location.hash || '#/clusters');
    app.navigate('#/login', { replace: true });
    return;
  }
  // A link inside a dialog (e.g. "Open that operation") leaves the screen: close its dialogs.
  for (const dlg of document.querySelectorAll('dialog[open]')) dlg.close('cancel');
  if (current && current.dispose) {
    try {
      current.dispose();
    } catch { /* a view failing to clean up must not block navigation */ }
  }
  current = null;
  const bar = document.getElementById('topbar');
  bar.hidden = !!match.r.public;
  currentNav = match.r.nav || null;
  if (!match.r.public) {
    if (!app.context) await app.refreshContext();
    else renderTopbar();
  }
  if (mySeq !== seq) return;
  let params;
  try {
    params = match.m.slice(1).map(decodeURIComponent);
  } catch {
    params = match.m.slice(1);
  }
  const view = match.r.view({ app, params, query });
  current = view;
  const main = document.getElementById('main');
  replace(main, view.el);
  document.title = `${view.title} · InstantStart`;
  // Focus: the view's chosen control, else its heading, so the new screen is announced.
  const target = view.focus || main.querySelector('h1');
  if (target) {
    if (!target.matches('input, select, textarea, button, a[href]')) target.setAttribute('tabindex', '-1');
    target.focus({ preventScroll: true });
  }
  window.scrollTo(0, 0);
}

/** After login: go where the user was headed (the login view calls it as `app.continueAfterLogin`). */
function continueAfterLogin() {
  const next = sessionStorage.getItem(NEXT_KEY);
  sessionStorage.removeItem(NEXT_KEY);
  app.context = null;
  app.navigate(next && next !== '#/login' ? next : '#/clusters');
}

api.onUnauthorized(() => {
  const { path } = parseHash();
  if (path === '/login') return;
  sessionStorage.setItem(NEXT_KEY, location.hash);
  sessionStorage.setItem('instantstart.loginReason', 'Your session ended. Log in again to continue.');
  app.context = null;
  app.navigate('#/login');
});

function boot() {
  applyTheme();
  if (window.matchMedia) window.matchMedia('(prefers-color-scheme: dark)').addEventListener?.('change', applyTheme);
  document.querySelector('.skip-link')?.addEventListener('click', (e) => {
    e.preventDefault();
    const main = document.getElementById('main');
    (main.querySelector('h1') || main).focus();
  });
  window.addEventListener('hashchange', route);
  route();
}

boot();

// The REST client of the UI: the same API the CLI and the MCP tools use.
// - Session: POST /api/login exchanges the token for an HttpOnly cookie and a CSRF token; the
//   CSRF token lives in sessionStorage (per tab) and goes in X-CSRF-Token on every change.
// - Errors are RFC 9457 problem+json; they become ApiError with the findings.
// - Live progress: OperationStream, a WebSocket that reconnects with backoff.

const CSRF_KEY = 'instantstart.csrf';
const WHO_KEY = 'instantstart.who';

/** A failed API call: HTTP status plus the problem document (title, detail, findings). */
export class ApiError extends Error {
  constructor(status, problem) {
    const p = problem && typeof problem === 'object' ? problem : {};
    super(p.detail || p.title || `HTTP ${status}`);
    this.status = status;
    this.problem = p;
    this.findings = Array.isArray(p.findings) ? p.findings : [];
  }

  get title() {
    return this.problem.title || (this.status ? `HTTP ${this.status}` : 'Network error');
  }
}

let unauthorizedHandler = () => {};

/** Called on 401 (and on a CSRF refusal): the session is gone, go back to the login screen. */
export function onUnauthorized(fn) {
  unauthorizedHandler = fn;
}

export function hasSession() {
  return !!sessionStorage.getItem(CSRF_KEY);
}

export function sessionUser() {
  try {
    return JSON.parse(sessionStorage.getItem(WHO_KEY) || 'null');
  } catch {
    return null;
  }
}

export function clearSession() {
  sessionStorage.removeItem(CSRF_KEY);
  sessionStorage.removeItem(WHO_KEY);
}

/** Random key for Idempotency-Key: one per form submission, reused by double clicks. */
export function newIdempotencyKey() {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return 'ui-' + Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * Calls the API. Returns {status, data}; throws ApiError for non-2xx answers and for network
 * failures (status 0).
 */
export async function request(method, path, { body, query, idempotencyKey, signal, auth = true } = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, String(v));
  }
  const headers = { Accept: 'application/json, application/problem+json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD') {
    const csrf = sessionStorage.getItem(CSRF_KEY);
    if (csrf) headers['X-CSRF-Token'] = csrf;
  }
  if (idempotencyKey) headers['Idempotency-Key'] = idempotencyKey;
  let res;
  try {
    res = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      // GETs revalidate with the ETag the server sent (a 304 keeps the cached body); nothing else is cached.
      cache: method === 'GET' ? 'no-cache' : 'no-store',
      signal,
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, {
      title: 'Control plane unreachable',
      detail: `The InstantStart server did not answer (${e.message}). It may be restarting; try again in a moment.`,
    });
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = res.ok ? text : { title: res.statusText, detail: text };
    }
  }
  if (!res.ok) {
    const err = new ApiError(res.status, data || { title: res.statusText || `HTTP ${res.status}` });
    const csrfRefused = res.status === 403 && /csrf/i.test(err.problem.detail || '');
    if (auth && (res.status === 401 || csrfRefused)) {
      clearSession();
      unauthorizedHandler(err);
    }
    throw err;
  }
  return { status: res.status, data, next: nextLink(res) };
}

/** The `next` link of a page of a list (`Link: <path?…&cursor=…>; rel="next"`), or null. */
function nextLink(res) {
  const m = (res.headers.get('Link') || '').match(/<([^>]+)>\s*;\s*rel="?next"?/);
  return m ? m[1] : null;
}

export const get = (path, opts) => request('GET', path, opts).then((r) => r.data);
/** One page of a list: `{items, next}`; `next` is the path of the following page, or null. */
export const page = (path, opts) => request('GET', path, opts).then((r) => ({ items: r.data, next: r.next }));

/** Every item of a paged list, following its `next` links (docs/rest-api.md, "Lists"). */
export async function list(path, opts = {}) {
  let r = await request('GET', path, opts);
  const items = [...(r.data || [])];
  while (r.next) {
    r = await request('GET', r.next, { signal: opts.signal });
    items.push(...(r.data || []));
  }
  return items;
}
export const post = (path, body, opts = {}) => request('POST', path, { ...opts, body });
export const put = (path, body, opts = {}) => request('PUT', path, { ...opts, body });
export const patch = (path, body, opts = {}) => request('PATCH', path, { ...opts, body });
export const del = (path, opts) => request('DELETE', path, opts);

/** Logs in with an API token; keeps the CSRF token for this tab. */
export async function login(token) {
  const { data } = await request('POST', '/api/login', { body: { token }, auth: false });
  sessionStorage.setItem(CSRF_KEY, data.csrf_token || '');
  sessionStorage.setItem(WHO_KEY, JSON.stringify({ name: data.name, scope: data.scope }));
  return data;
}

export async function logout() {
  try {
    await request('POST', '/api/logout', { auth: false });
  } finally {
    clearSession();
  }
}

/** Path-safe segment. */
export const seg = (s) => encodeURIComponent(s);

/**
 * Follows operations over the WebSocket /api/operations/stream (the session cookie
 * authenticates it). Reconnects with exponential backoff when the connection drops (server
 * restart, network); the server sends a snapshot on every (re)connect, so nothing is missed.
 *
 *   const s = new OperationStream({operationId, onOperation(op) {}, onState(state) {}});
 *   s.start(); … s.stop();
 *
 * onState receives 'connecting' | 'live' | 'reconnecting' | 'stopped'.
 */
export class OperationStream {
  constructor({ operationId, target, onOperation, onState } = {}) {
    this.operationId = operationId;
    this.target = target;
    this.onOperation = onOperation || (() => {});
    this.onState = onState || (() => {});
    this.attempt = 0;
    this.stopped = true;
    this.ws = null;
    this.retryTimer = null;
    this.watchdog = null;
    this.state = 'stopped';
    this.wake = () => {
      if (!this.stopped && this.state === 'reconnecting') this.reconnectNow();
    };
  }

  start() {
    this.stopped = false;
    window.addEventListener('online', this.wake);
    document.addEventListener('visibilitychange', this.wake);
    this.connect();
    return this;
  }

  stop() {
    this.stopped = true;
    window.removeEventListener('online', this.wake);
    document.removeEventListener('visibilitychange', this.wake);
    clearTimeout(this.retryTimer);
    clearTimeout(this.watchdog);
    if (this.ws) {
      this.ws.onclose = null;
      this.ws.onmessage = null;
      this.ws.onerror = null;
      try {
        this.ws.close(1000, 'done');
      } catch { /* already closed */ }
      this.ws = null;
    }
    this.setState('stopped');
  }

  setState(state, extra) {
    this.state = state;
    this.onState(state, extra);
  }

  url() {
    const u = new URL('/api/operations/stream', location.origin);
    u.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
    if (this.operationId) u.searchParams.set('operation_id', this.operationId);
    if (this.target) u.searchParams.set('target', this.target);
    return u.toString();
  }

  connect() {
    if (this.stopped) return;
    this.setState(this.attempt === 0 ? 'connecting' : 'reconnecting');
    let ws;
    try {
      ws = new WebSocket(this.url());
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      this.attempt = 0;
      this.setState('live');
      this.feedWatchdog();
    };
    ws.onmessage = (ev) => {
      this.feedWatchdog();
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch {
        return;
      }
      if (msg && msg.type === 'operation' && msg.operation) this.onOperation(msg.operation);
    };
    ws.onerror = () => { /* onclose follows */ };
    ws.onclose = () => {
      clearTimeout(this.watchdog);
      if (this.ws === ws) this.ws = null;
      if (!this.stopped) this.scheduleReconnect();
    };
  }

  /** The server sends a heartbeat every 15 s; silence for 40 s means a dead connection. */
  feedWatchdog() {
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => {
      if (this.ws) this.ws.close();
    }, 40_000);
  }

  scheduleReconnect() {
    this.attempt += 1;
    const base = Math.min(8000, 250 * 2 ** Math.min(this.attempt - 1, 6));
    const delay = Math.round(base * (0.8 + Math.random() * 0.4));
    this.setState('reconnecting', { delay, attempt: this.attempt });
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.connect(), delay);
    // A handshake refused with 401 looks like any other close: check the session now and then.
    if (this.attempt % 3 === 0) get('/api/session').catch(() => {});
  }

  reconnectNow() {
    clearTimeout(this.retryTimer);
    this.connect();
  }
}

// <is-status value="running"> — a status or phase as a badge: text plus a glyph, never color alone.

const GLYPHS = {
  pending: '○',
  submitting: '◔',
  submitted: '◑',
  polling: '◕',
  running: '◕',
  creating: '◕',
  importing: '◕',
  deleting: '◕',
  succeeded: '✓',
  ready: '✓',
  active: '✓',
  failed: '✕',
  delete_failed: '✕',
  needs_attention: '!',
  cancelled: '–',
  pass: '✓',
  warn: '!',
  fail: '✕',
};

/** Glyphs of values without their own (provider states such as InService or Updating). */
const TONE_GLYPHS = { ok: '✓', bad: '✕', warn: '!', busy: '◔' };

const TONES = {
  succeeded: 'ok', ready: 'ok', active: 'ok', running: 'busy', creating: 'busy', importing: 'busy',
  deleting: 'busy', submitting: 'busy', submitted: 'busy', polling: 'busy', failed: 'bad',
  delete_failed: 'bad', needs_attention: 'warn', cancelled: 'muted', pending: 'muted',
  pass: 'ok', warn: 'warn', fail: 'bad',
};

export function tone(value) {
  const v = String(value || '').toLowerCase();
  if (TONES[v]) return TONES[v];
  if (/fail|error/.test(v)) return 'bad';
  if (/inservice|running|active|ready/.test(v)) return 'ok';
  if (/pending|creating|updating|progress|scaling/.test(v)) return 'busy';
  return 'muted';
}

class StatusBadge extends HTMLElement {
  static get observedAttributes() {
    return ['value', 'tone', 'glyph'];
  }

  connectedCallback() {
    this.render();
  }

  attributeChangedCallback() {
    this.render();
  }

  render() {
    const value = this.getAttribute('value') || '';
    const key = value.toLowerCase();
    this.className = `badge tone-${this.getAttribute('tone') || tone(value)}`;
    const glyph = document.createElement('span');
    glyph.className = 'glyph';
    glyph.setAttribute('aria-hidden', 'true');
    glyph.textContent = this.getAttribute('glyph') || GLYPHS[key] || TONE_GLYPHS[this.getAttribute('tone') || tone(value)] || '•';
    const text = document.createElement('span');
    text.textContent = value.replaceAll('_', ' ');
    this.replaceChildren(glyph, text);
  }
}

if (!customElements.get('is-status')) customElements.define('is-status', StatusBadge);

/** Convenience: a badge element for `value` (tone: ok | bad | warn | busy | muted overrides; glyph too). */
export function badge(value, toneOverride, glyph) {
  const el = document.createElement('is-status');
  if (toneOverride) el.setAttribute('tone', toneOverride);
  if (glyph) el.setAttribute('glyph', glyph);
  el.setAttribute('value', value ?? '');
  return el;
}

// Timing of an operation's steps: elapsed time and ETAs over the step DAG.
// expected_secs is at real AWS speed; on the simulated cloud it is divided by its speed factor.

export const ACTIVE_PHASES = new Set(['submitting', 'submitted', 'polling']);
export const STOPPED_PHASES = new Set(['failed', 'needs_attention', 'cancelled']);
export const RETRYABLE_PHASES = new Set(['failed', 'needs_attention', 'cancelled']);

const ms = (iso) => {
  const t = iso ? Date.parse(iso) : NaN;
  return Number.isNaN(t) ? null : t;
};

/** Expected duration of a step here, in ms (null when unknown). */
export function expectedMs(step, speed = 1) {
  if (step.expected_secs === null || step.expected_secs === undefined) return null;
  return (step.expected_secs * 1000) / (speed > 0 ? speed : 1);
}

/** Elapsed ms of a step: started → finished (or now while it runs). */
export function elapsedMs(step, now = Date.now()) {
  const start = ms(step.started_at);
  if (start === null) return null;
  const end = ms(step.finished_at) ?? (ACTIVE_PHASES.has(step.phase) ? now : ms(step.updated_at) ?? now);
  return Math.max(0, end - start);
}

/**
 * Estimates for every step and for the whole operation, following the DAG: a pending step
 * starts when its last dependency is expected to finish.
 * Returns {steps: Map(key → {elapsed, remaining, overdue}), remaining, done, total}.
 * `remaining` is null when unknown (a step stopped, or the operation is over).
 */
export function estimate(op, speed = 1, now = Date.now()) {
  const byKey = new Map(op.steps.map((s) => [s.key, s]));
  const finish = new Map();
  const visiting = new Set();
  const finishAt = (key) => {
    if (finish.has(key)) return finish.get(key);
    const s = byKey.get(key);
    if (!s || visiting.has(key)) return now;
    visiting.add(key);
    let t;
    if (s.phase === 'succeeded') {
      t = ms(s.finished_at) ?? now;
    } else if (STOPPED_PHASES.has(s.phase)) {
      t = Infinity;
    } else {
      const exp = expectedMs(s, speed) ?? 0;
      const start = ACTIVE_PHASES.has(s.phase) && ms(s.started_at) !== null
        ? ms(s.started_at)
        : Math.max(now, ...s.depends_on.map(finishAt));
      t = Math.max(now, start + exp);
    }
    visiting.delete(key);
    finish.set(key, t);
    return t;
  };
  const steps = new Map();
  for (const s of op.steps) {
    const exp = expectedMs(s, speed);
    const elapsed = elapsedMs(s, now);
    let remaining = null;
    let overdue = false;
    if (ACTIVE_PHASES.has(s.phase) && exp !== null && elapsed !== null) {
      remaining = exp - elapsed;
      if (remaining < 0) {
        overdue = true;
        remaining = 0;
      }
    }
    steps.set(s.key, { elapsed, expected: exp, remaining, overdue });
  }
  const done = op.steps.filter((s) => s.phase === 'succeeded').length;
  let remaining = null;
  if (op.status === 'running') {
    const last = Math.max(now, ...op.steps.map((s) => finishAt(s.key)));
    remaining = Number.isFinite(last) ? last - now : null;
  }
  return { steps, remaining, done, total: op.steps.length };
}

/** Wall-clock duration of the operation so far. */
export function operationElapsed(op, now = Date.now()) {
  const start = ms(op.created_at);
  if (start === null) return null;
  const end = op.status === 'running' ? now : ms(op.finished_at) ?? ms(op.updated_at) ?? now;
  return Math.max(0, end - start);
}

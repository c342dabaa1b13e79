// Formatting and axis arithmetic for the console: pure functions, unit
// tested by console/testdata/format.test.js.

/** thousands formats an integer with thin commas: 1,234,567. Null is "–". */
export function thousands(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return '–';
  return Math.round(n).toLocaleString('en-US');
}

/** perSecond formats a rate: "0", "0.4", "12", "1,250" (a second). */
export function perSecond(x) {
  if (x === null || x === undefined || Number.isNaN(x)) return '–';
  if (x === 0) return '0';
  if (x < 10) return (Math.round(x * 10) / 10).toString();
  return thousands(x);
}

/** ago says how long before now (ms) a moment (ms) was: "just now", "12 s ago", "3 min ago". */
export function ago(then, now) {
  const s = Math.max(0, Math.round((now - then) / 1000));
  if (s < 2) return 'just now';
  if (s < 90) return `${s} s ago`;
  const m = Math.round(s / 60);
  if (m < 90) return `${m} min ago`;
  return `${Math.round(m / 60)} h ago`;
}

/** clock formats a moment as HH:MM:SS in UTC, the zone every figure of the API is in. */
export function clock(ms) {
  return new Date(ms).toISOString().slice(11, 19);
}

/** when formats a moment as "2026-08-01 10:00:00 UTC". */
export function when(ms) {
  return new Date(ms).toISOString().slice(0, 19).replace('T', ' ') + ' UTC';
}

/** span formats a duration in seconds: "45 s", "2 min 5 s", "1 h 4 min". */
export function span(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m} min ${s % 60} s` : `${m} min`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/**
 * niceTicks returns round values covering [lo, hi] for a value axis:
 * steps of 1, 2 or 5 times a power of ten, about `count` of them.
 * @returns {{ticks: number[], max: number}}
 */
export function niceTicks(lo, hi, count = 4) {
  if (!(hi > lo)) hi = lo + 1;
  const raw = (hi - lo) / count;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= raw);
  const first = Math.floor(lo / step) * step;
  const ticks = [];
  for (let v = first; v <= hi + step * 1e-9; v += step) ticks.push(Math.round(v / step) * step);
  if (ticks[ticks.length - 1] < hi) ticks.push(ticks[ticks.length - 1] + step);
  return { ticks, max: ticks[ticks.length - 1] };
}

/** The steps a time axis may tick at, in seconds. */
const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];

/**
 * timeTicks returns the moments (ms) of a time axis from t0 to t1 (ms), on
 * whole steps of the clock (every 10 s, every minute…), about `count`.
 */
export function timeTicks(t0, t1, count = 5) {
  const secs = Math.max(1, (t1 - t0) / 1000);
  const step = (TIME_STEPS.find((s) => secs / s <= count) ?? 3600) * 1000;
  const ticks = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) ticks.push(t);
  return ticks;
}

/** tickLabel labels a time tick: HH:MM on whole minutes, else HH:MM:SS (UTC). */
export function tickLabel(ms) {
  const c = clock(ms);
  return c.endsWith(':00') ? c.slice(0, 5) : c;
}

/** Human names of the contract's error codes, for the rejections table. */
const CODE_NAMES = {
  sold_out: 'sold out',
  rate_limited: 'rate limited',
  sale_paused: 'sale paused',
  limit_reached: 'per-user limit reached',
  not_eligible: 'not eligible (account age)',
  admission_required: 'no admission token',
  admission_invalid: 'admission token invalid',
  admission_expired: 'admission token expired',
  admission_used: 'admission token already used',
  invalid_token: 'waiting-room ticket invalid',
  challenge_failed: 'proof of work failed',
  unauthenticated: 'not signed in',
  bad_request: 'malformed request',
  idempotency_key_reused: 'idempotency key reused',
  overloaded: 'shed (server busy)',
  unavailable: 'unavailable',
  closed: 'sale closed',
  not_registered: 'not registered (lottery)',
  not_selected: 'not selected (lottery)',
};

/** codeName names an error code for a person, keeping the code itself visible. */
export function codeName(code) {
  return CODE_NAMES[code] ?? code.replaceAll('_', ' ');
}

/** stateName names a sale's state. */
export function stateName(state) {
  return { scheduled: 'Scheduled', open: 'Open', paused: 'Paused', sold_out: 'Sold out', closed: 'Closed' }[state] ?? state;
}

/** toUTCInput shows an RFC 3339 time as the console's UTC field does: "2026-08-01 10:00:00". */
export function toUTCInput(iso) {
  if (!iso) return '';
  return new Date(iso).toISOString().slice(0, 19).replace('T', ' ');
}

/**
 * fromUTCInput reads the UTC field: "YYYY-MM-DD HH:MM[:SS]" (or with a T),
 * in UTC unless it ends in Z or an offset; to RFC 3339. '' stays '';
 * anything else is null.
 */
export function fromUTCInput(v) {
  const s = v.trim();
  if (!s) return '';
  const m = s.match(/^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2})(:\d{2})?(Z|[+-]\d{2}:\d{2})?$/i);
  if (!m) return null;
  const d = new Date(`${m[1]}T${m[2]}${m[3] || ':00'}${(m[4] || 'Z').toUpperCase()}`);
  if (Number.isNaN(d.getTime())) return null;
  return d.toISOString().replace('.000Z', 'Z');
}

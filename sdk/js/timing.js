// When the SDK asks the server again. Three rules from the design: never
// sooner than the server's Retry-After; never a synchronised herd (every
// delay is jittered upwards, so a million pages that got the same
// Retry-After spread over a window instead of arriving together); and
// never a tight loop (no poll sooner than a second, and failures back off
// exponentially, because an error is an instruction to press again).

/** The shortest delay between two requests of one page. */
export const MIN_DELAY_MS = 1000;

/** The longest delay after repeated failures. */
export const MAX_BACKOFF_MS = 60_000;

/** Used when an answer that asks to poll again carries no Retry-After. */
export const DEFAULT_RETRY_SECONDS = 2;

/**
 * jitter lengthens ms by a random share of up to 30%: a crowd told the
 * same Retry-After comes back spread over [ms, 1.3 ms), and none sooner
 * than told (a server may hold a page that polls early as automation).
 * @param {number} ms
 * @param {() => number} random uniform in [0, 1)
 */
export function jitter(ms, random = Math.random) {
  return ms * (1 + 0.3 * random());
}

/**
 * pollDelay is when to poll again after an answer with Retry-After
 * (seconds; 0 or missing: the default), jittered, never under it nor
 * under a second.
 */
export function pollDelay(retryAfterSeconds, random = Math.random) {
  const base = (retryAfterSeconds > 0 ? retryAfterSeconds : DEFAULT_RETRY_SECONDS) * 1000;
  return Math.max(MIN_DELAY_MS, Math.round(jitter(base, random)));
}

/**
 * backoffDelay is when to try again after the n-th failure in a row
 * (n >= 1): 2, 4, 8 ... seconds up to a minute, or the server's
 * Retry-After if that is longer, jittered, never under a second.
 */
export function backoffDelay(failures, retryAfterSeconds = 0, random = Math.random) {
  const exp = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** Math.max(1, failures));
  const base = Math.max(exp, (retryAfterSeconds || 0) * 1000);
  return Math.max(MIN_DELAY_MS, Math.round(jitter(base, random)));
}

/**
 * parseRetryAfter reads a Retry-After header: whole seconds (what this
 * server sends) or an HTTP date. Returns seconds, 0 when absent or unreadable.
 * @param {string|null} value
 * @param {number} nowMs the client's clock, for the date form
 */
export function parseRetryAfter(value, nowMs = Date.now()) {
  if (!value) return 0;
  if (/^\s*\d+\s*$/.test(value)) return Number(value);
  const at = Date.parse(value);
  return Number.isNaN(at) ? 0 : Math.max(0, Math.ceil((at - nowMs) / 1000));
}

/**
 * newKey returns a fresh random Idempotency-Key: 128 bits as hex, from
 * crypto.getRandomValues (which, unlike crypto.randomUUID, works outside
 * secure contexts too).
 */
export function newKey(getRandomValues = (a) => crypto.getRandomValues(a)) {
  const bytes = getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

// Unit tests of timing.js: jittered polling that never comes back sooner
// than told, never herds and never loops tightly. Run by sdk/js_test.go
// (go test ./sdk) and .ci/run (node --test).
import test from 'node:test';
import assert from 'node:assert/strict';
import { backoffDelay, MAX_BACKOFF_MS, MIN_DELAY_MS, newKey, parseRetryAfter, pollDelay } from '../timing.js';

const lowest = () => 0;
const highest = () => 0.999999;

test('pollDelay jitters Retry-After by 1 to 1.3: never sooner', () => {
  assert.equal(pollDelay(10, lowest), 10000);
  assert.equal(pollDelay(10, highest), 13000);
  assert.equal(pollDelay(10, () => 0.5), 11500);
  for (let ra = 1; ra <= 120; ra++) assert.ok(pollDelay(ra, lowest) >= ra * 1000, `Retry-After ${ra}`);
});

/** seeded is a small deterministic generator (an LCG), so the test is repeatable. */
function seeded(seed) {
  return () => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    return seed / 2 ** 32;
  };
}

test('pollDelay spreads a herd that got the same Retry-After', () => {
  // A thousand pages told "Retry-After: 5" come back spread over the whole
  // window 5 s to 6.5 s: every tenth of it gets some, none a crowd.
  const random = seeded(42);
  const tenths = new Array(10).fill(0);
  for (let i = 0; i < 1000; i++) {
    const ms = pollDelay(5, random);
    assert.ok(ms >= 5000 && ms <= 6500, `delay ${ms}`);
    tenths[Math.min(9, Math.floor((ms - 5000) / 150))]++;
  }
  for (const n of tenths) assert.ok(n > 50 && n < 200, `pages per tenth of the window: ${tenths}`);
});

test('pollDelay never polls sooner than a second', () => {
  assert.equal(pollDelay(1, lowest), MIN_DELAY_MS);
  assert.equal(pollDelay(0, lowest), 2000); // no Retry-After: the default, 2 s
  assert.equal(pollDelay(-3, lowest), 2000);
  assert.equal(pollDelay(undefined, lowest), 2000);
});

test('backoffDelay doubles, honours a longer Retry-After, and caps at a minute', () => {
  assert.equal(backoffDelay(1, 0, lowest), 2000);
  assert.equal(backoffDelay(2, 0, lowest), 4000);
  assert.equal(backoffDelay(3, 0, lowest), 8000);
  assert.equal(backoffDelay(3, 30, lowest), 30000);
  assert.equal(backoffDelay(3, 30, highest), 39000);
  assert.equal(backoffDelay(40, 0, lowest), MAX_BACKOFF_MS);
  assert.ok(backoffDelay(1, 0, lowest) >= MIN_DELAY_MS);
});

test('parseRetryAfter reads seconds and HTTP dates', () => {
  assert.equal(parseRetryAfter('5'), 5);
  assert.equal(parseRetryAfter(' 12 '), 12);
  assert.equal(parseRetryAfter(null), 0);
  assert.equal(parseRetryAfter('soon'), 0);
  const now = Date.parse('2026-08-01T10:00:00Z');
  assert.equal(parseRetryAfter('Sat, 01 Aug 2026 10:00:30 GMT', now), 30);
  assert.equal(parseRetryAfter('Sat, 01 Aug 2026 09:00:00 GMT', now), 0);
});

test('newKey is 128 random bits as hex, fresh each time', () => {
  const a = newKey();
  assert.match(a, /^[0-9a-f]{32}$/);
  assert.notEqual(newKey(), a);
});
